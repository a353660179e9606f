//go:build !unix

package evalrun

import "os/exec"

// killGroup does nothing where process groups are not available; the
// command's WaitDelay bounds the wait for its children.
func killGroup(*exec.Cmd) {}
