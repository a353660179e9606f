//go:build unix

package eval

import (
	"os/exec"
	"syscall"
)

// setProcessGroup runs cmd in its own process group and, on cancel, kills
// the whole group, so a grader's children (sh -lc …) die with it.
func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		if cmd.Process == nil {
			return nil
		}
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}
