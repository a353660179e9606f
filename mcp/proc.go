package mcp

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// stderrTail is how much of a stdio server's stderr is kept.
const stderrTail = 8 << 10

// A proc is a stdio server's process. It is reaped as soon as it exits,
// whoever is talking to it, so that it never lingers as a zombie.
type proc struct {
	cmd    *exec.Cmd
	stdin  *os.File // our end of the child's stdin
	stdout *os.File // our end of the child's stdout
	stderr *tail
	exited chan struct{} // closed once the process has exited and been reaped
	err    error         // cmd.Wait's result, once exited is closed
}

// startProc starts s.Command with its own pipes. The pipes are os.Pipe
// files rather than cmd.StdoutPipe, so that reaping the process (cmd.Wait)
// does not close the end the session still reads from.
func startProc(s Server) (*proc, error) {
	cmd := exec.Command(s.Command, s.Args...)
	cmd.Dir = s.Dir
	if len(s.Env) > 0 {
		cmd.Env = append(os.Environ(), s.Env...)
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("starting %s: %w", s.Command, err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, fmt.Errorf("starting %s: %w", s.Command, err)
	}
	p := &proc{cmd: cmd, stdin: inW, stdout: outR, stderr: &tail{}, exited: make(chan struct{})}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, p.stderr
	// A process the server started may hold stderr open after the server
	// exits; Wait stops copying from it after this long.
	cmd.WaitDelay = time.Second
	err = cmd.Start()
	inR.Close() // the child's ends: the child has its own copies now
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		return nil, fmt.Errorf("starting %s: %w", s.Command, err)
	}
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// stop ends the process: stdin is closed (the protocol's way to ask a
// stdio server to exit), then it gets SIGTERM after grace and SIGKILL
// after grace again (at once when grace is 0). It returns once the process
// has been reaped, or with an error after a few seconds if even SIGKILL
// does not end it.
func (p *proc) stop(grace time.Duration) error {
	p.stdin.Close() // may already be closed by the session: harmless
	wait := func(d time.Duration) bool {
		if d <= 0 {
			select {
			case <-p.exited:
				return true
			default:
				return false
			}
		}
		select {
		case <-p.exited:
			return true
		case <-time.After(d):
			return false
		}
	}
	if !wait(grace) {
		// A failed SIGTERM (the process just exited, or no such signal
		// on this system) goes straight to SIGKILL.
		termed := p.cmd.Process.Signal(syscall.SIGTERM) == nil
		if !termed || !wait(grace) {
			p.cmd.Process.Kill()
		}
		if !wait(5 * time.Second) {
			p.stdout.Close()
			return fmt.Errorf("process %d did not exit within 5s of SIGKILL", p.cmd.Process.Pid)
		}
	}
	p.stdout.Close()
	return nil
}

// exitText says how the process exited, or "" while it runs.
func (p *proc) exitText() string {
	select {
	case <-p.exited:
	default:
		return ""
	}
	if p.err == nil {
		return "exit status 0"
	}
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		return ee.String()
	}
	return p.err.Error()
}

// A tail keeps the last stderrTail bytes written to it. It is safe for
// concurrent use.
type tail struct {
	mu  sync.Mutex
	buf []byte
	cut bool // bytes before buf were dropped
}

// Write keeps the end of b.
func (t *tail) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := len(b)
	if len(b) >= stderrTail {
		b = b[len(b)-stderrTail:]
		t.buf, t.cut = t.buf[:0], true
	}
	if over := len(t.buf) + len(b) - stderrTail; over > 0 {
		t.buf, t.cut = append(t.buf[:0], t.buf[over:]...), true
	}
	t.buf = append(t.buf, b...)
	return n, nil
}

// String returns what is kept, prefixed with "…" when the start was cut.
func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.cut {
		return "…" + string(t.buf)
	}
	return string(t.buf)
}
