package gitrepo

import (
	"os/exec"
	"runtime"
	"syscall"
)

// dieWithParent makes the git child get SIGKILL when pem dies (a SIGKILLed
// consolidation), so that a repack it started never runs on, unlocked, into
// the next command — which would find a pack gone between listing the pack
// directory and opening it (seen in TestKillAtRandomPoints). Killing git
// repack midway is safe: it deletes the old packs only after the new one is
// in place. The signal follows the OS thread that started the child, so run
// locks the goroutine to its thread until the child ends.
func dieWithParent(cmd *exec.Cmd) (run func() ([]byte, error)) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return func() ([]byte, error) {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		return cmd.CombinedOutput()
	}
}
