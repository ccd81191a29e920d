package gitrepo

import (
	"fmt"

	"github.com/go-git/go-git/v5/config"
)

// MergeDriver returns the command line git runs for pem's merge driver
// (merge.pem.driver) as git would find it: the repository's own config
// first, then the user's (~/.gitconfig, $XDG_CONFIG_HOME/git/config), then
// the system's. "" when none names it. (go-git's ConfigScoped keeps the
// repository's sections alone whenever it has any, so each scope is read on
// its own here.)
func (h *History) MergeDriver() (string, error) {
	local, err := h.repo.Config()
	if err != nil {
		return "", fmt.Errorf("reading the git config of %s: %w", h.root, err)
	}
	if d := local.Raw.Section("merge").Subsection("pem").Option("driver"); d != "" {
		return d, nil
	}
	for _, scope := range []config.Scope{config.GlobalScope, config.SystemScope} {
		cfg, err := config.LoadConfig(scope)
		if err != nil {
			continue // an unreadable user or system config is git's to report
		}
		if d := cfg.Raw.Section("merge").Subsection("pem").Option("driver"); d != "" {
			return d, nil
		}
	}
	return "", nil
}
