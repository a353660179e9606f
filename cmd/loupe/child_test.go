package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// childEnv runs loupe in a child test process with the arguments it holds
// (separated by \x1f), so that commands that serve (loupe serve, loupe
// mcp) are tested as real processes: signals, exit codes, stdio.
const childEnv = "LOUPE_CMD_CHILD"

func TestMain(m *testing.M) {
	if args := os.Getenv(childEnv); args != "" {
		root := newRootCmd()
		root.SetArgs(strings.Split(args, "\x1f"))
		ctx, stop := context.WithCancel(context.Background())
		defer stop()
		if err := root.ExecuteContext(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "loupe:", err)
			os.Exit(exitCode(err))
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// loupeChild returns the command that runs `loupe args…` in a child
// process (not started).
func loupeChild(args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+strings.Join(args, "\x1f"))
	return cmd
}

// startChild starts `loupe args…` (a command that listens) in a child
// process and returns it with the URL it says it listens on. The child is
// killed and reaped when the test ends.
func startChild(t testing.TB, args ...string) (*exec.Cmd, string) {
	t.Helper()
	cmd := loupeChild(args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		if _, rest, ok := strings.Cut(sc.Text(), "listening on "); ok {
			url, _, _ := strings.Cut(rest, ",")
			go io.Copy(io.Discard, stderr)
			return cmd, url
		}
	}
	t.Fatalf("loupe %s did not say where it listens", strings.Join(args, " "))
	return nil, ""
}
