//go:build unix

package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/loupe-dev/loupe/mcp"
)

// reaped reports whether pid is gone for good: no process, not even a
// zombie waiting for its parent to collect its exit status.
func reaped(pid int) bool {
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

// zombie reports whether pid is a zombie (Linux only; false elsewhere).
func zombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// pid (comm) state …; comm may hold spaces and parentheses.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] == 'Z'
}

// TestNoZombies checks that the server's process is gone, and reaped,
// however the connection ends.
func TestNoZombies(t *testing.T) {
	cases := []struct {
		name string
		mode string                                           // the test server's mode
		end  func(t *testing.T, c *mcp.Client, cancel func()) // ends the connection
		now  bool                                             // the process is reaped when end returns
	}{
		{"Close", "1", func(t *testing.T, c *mcp.Client, _ func()) {
			if err := c.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		}, true},
		{"ctx done", "1", func(t *testing.T, c *mcp.Client, cancel func()) { cancel() }, false},
		{"server dies", "1", func(t *testing.T, c *mcp.Client, _ func()) {
			if _, err := c.CallTool(context.Background(), "die", nil); err == nil {
				t.Error("die succeeded")
			}
		}, true},
		// Deaf to SIGTERM and to its stdin closing: Close kills it.
		{"Close kills", "stubborn", func(t *testing.T, c *mcp.Client, _ func()) {
			start := time.Now()
			if err := c.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
			if d := time.Since(start); d < 4*time.Second {
				t.Errorf("Close took %v; a server deaf to SIGTERM gets 2s+2s", d)
			}
		}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := stdioServer(t)
			s.Env = []string{serverEnv + "=" + tc.mode}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			c, err := mcp.Connect(ctx, s)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			pid := mcp.PID(c)
			if pid <= 0 || reaped(pid) {
				t.Fatalf("pid %d: the server is not running", pid)
			}
			tc.end(t, c, cancel)
			if tc.now && !reaped(pid) {
				t.Errorf("process %d still exists (zombie: %v) when the connection has ended", pid, zombie(pid))
			}
			if !waitFor(10*time.Second, func() bool { return reaped(pid) }) {
				t.Fatalf("process %d still exists (zombie: %v)", pid, zombie(pid))
			}
			_, err = c.CallTool(context.Background(), "echo", json.RawMessage(`{"message":"hi"}`))
			if err == nil || !strings.Contains(err.Error(), `mcp server "gotest", tool "echo": `) {
				t.Errorf("call after the end: err = %v", err)
			}
			if tc.name == "ctx done" && !strings.Contains(err.Error(), "the client is closed: the context given to Connect is done (context canceled)") {
				t.Errorf("call after ctx is done: err = %v", err)
			}
		})
	}
}
