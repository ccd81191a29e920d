//go:build !linux

package gitrepo

import "os/exec"

// dieWithParent: only Linux has a parent-death signal; elsewhere a git child
// of a killed pem runs to its end.
func dieWithParent(cmd *exec.Cmd) func() ([]byte, error) { return cmd.CombinedOutput }
