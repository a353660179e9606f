//go:build unix

package evalrun

import (
	"os/exec"
	"syscall"
)

// killGroup runs cmd in a process group of its own and makes cancellation
// kill the whole group, so that a timed-out `sh -c` does not leave its
// children running (and holding the output pipe open).
func killGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
}
