package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/pemdev/pem/engine"
)

// configHeader opens the pem.yaml that Init writes.
const configHeader = `# pem knowledge tree, format 1 (see docs/data-model.md).
# Policy: every threshold pem uses. Change a value to override it for this
# tree; a field you delete keeps pem's default.
`

// gitattributes makes the layout merge in pull requests (DESIGN §2): derived
// and trace and verdict files collapse in review; experience and facts use pem's merge driver.
const gitattributes = GitAttributes

// GitAttributes are the lines of the tree's .gitattributes, which
// gitrepo.(*Repo).InstallMergeDriver adds to an existing tree.
const GitAttributes = "experience/** linguist-generated=true merge=pem\ntraces/** linguist-generated=true\nverdicts/** linguist-generated=true\nfacts/** merge=pem\n"

// gitignore keeps the lock file and leftover temporary files out of git,
// and the state's directories off the main branch (StateIgnore).
const gitignore = ".pem.lock\n*.tmp\n" + StateIgnore

// InitFiles names what Init creates, for messages: the files, and the
// directories with a trailing slash.
var InitFiles = []string{configFile, tracesDir + "/", experienceDir + "/", factsDir + "/", ".gitattributes", ".gitignore"}

// Init creates the tree's layout in dir (created if missing): pem.yaml with
// the default policy, traces/, experience/ and facts/ (each with a .gitkeep),
// .gitattributes and .gitignore. An existing tree (dir/pem.yaml exists) is
// left exactly as it is and created is false. pem.yaml is written last, so an
// interrupted Init is finished by the next one. The git repository is
// InitRepo's job.
func Init(ctx context.Context, dir string) (created bool, err error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return false, fmt.Errorf("initializing %s: %w", dir, err)
	}
	if fi, err := os.Lstat(filepath.Join(abs, configFile)); err == nil {
		if !fi.Mode().IsRegular() {
			return false, fmt.Errorf("%w: %s is not a regular file: delete it and run pem init again", engine.ErrUnsafePath, filepath.Join(dir, configFile))
		}
		return false, nil
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return false, fmt.Errorf("initializing %s: %w", dir, err)
	}
	root, err := os.OpenRoot(abs)
	if err != nil {
		return false, fmt.Errorf("initializing %s: %w", dir, err)
	}
	defer root.Close()
	s := &Store{dir: abs, root: root}
	for _, d := range []string{tracesDir, experienceDir, factsDir} {
		if err := s.mkdirs(d); err != nil {
			return false, fmt.Errorf("initializing %s: %w", dir, err)
		}
		if err := s.createFile(d+"/.gitkeep", nil); err != nil && !errors.Is(err, fs.ErrExist) {
			return false, fmt.Errorf("initializing %s: %w", dir, err)
		}
	}
	if err := s.ensureLines(".gitattributes", gitattributes); err != nil {
		return false, fmt.Errorf("initializing %s: %w", dir, err)
	}
	if err := s.ensureLines(".gitignore", gitignore); err != nil {
		return false, fmt.Errorf("initializing %s: %w", dir, err)
	}
	body, err := Marshal(engine.DefaultConfig())
	if err != nil {
		return false, err
	}
	starter, err := approvalStarter()
	if err != nil {
		return false, err
	}
	err = s.createFile(configFile, append(append([]byte(configHeader), body...), starter...))
	if errors.Is(err, fs.ErrExist) {
		return false, nil // another Init won the race
	}
	if err != nil {
		return false, fmt.Errorf("initializing %s: %w", dir, err)
	}
	return true, nil
}

// approvalStarter is engine.DefaultApproval as a commented pem.yaml block:
// a new tree asks for no approval until its owner uncomments it.
func approvalStarter() ([]byte, error) {
	b, err := Marshal(struct {
		Approval engine.ApprovalPolicy `yaml:"approval"`
	}{engine.DefaultApproval()})
	if err != nil {
		return nil, err
	}
	out := []byte("# Approval: steps that need a person's yes before the agent takes them, planned\n" +
		"# or replayed (docs/data-model.md#approval). Uncomment to be asked before payments,\n" +
		"# deletions and sending:\n")
	for _, l := range bytes.SplitAfter(b, []byte("\n")) {
		if len(l) > 0 {
			out = append(append(out, "# "...), l...)
		}
	}
	return out, nil
}

// ensureLines creates rel with want, or appends the lines of want it lacks.
func (s *Store) ensureLines(rel, want string) error {
	old, _, err := s.readFile(rel, MaxConfigBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return s.createFile(rel, []byte(want))
	}
	if err != nil {
		return err
	}
	have := map[string]bool{}
	for _, l := range bytes.Split(old, []byte("\n")) {
		have[string(bytes.TrimSpace(l))] = true
	}
	out := old
	for _, l := range bytes.SplitAfter([]byte(want), []byte("\n")) {
		if len(l) == 0 || have[string(bytes.TrimSpace(l))] {
			continue
		}
		if len(out) > 0 && out[len(out)-1] != '\n' {
			out = append(out, '\n')
		}
		out = append(out, l...)
	}
	_, err = s.replaceFile(rel, out, MaxConfigBytes)
	return err
}
