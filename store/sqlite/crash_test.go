package sqlite_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/loupe-dev/loupe/store/sqlite"
	"github.com/loupe-dev/loupe/store/storetest"
	"github.com/loupe-dev/loupe/trace"
)

const crashEnv = "LOUPE_TEST_CRASH_WRITER"

// TestKillMidIngest runs a writer in a child process (this test binary,
// re-executed), kills it with SIGKILL in the middle of ingest, and checks
// that every batch the child saw acknowledged (Append returned nil) is in
// the store.
func TestKillMidIngest(t *testing.T) {
	if path := os.Getenv(crashEnv); path != "" {
		crashWriter(path)
		return
	}
	path := filepath.Join(t.TempDir(), "loupe.db")
	cmd := exec.Command(os.Args[0], "-test.run=^TestKillMidIngest$")
	cmd.Env = append(os.Environ(), crashEnv+"="+path)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	acked := map[trace.TraceID]int{}
	sc := bufio.NewScanner(out)
	killed := false
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 3 || f[0] != "ack" {
			continue // go test's own output
		}
		id, err := trace.ParseTraceID(f[1])
		if err != nil {
			t.Fatal(err)
		}
		var n int
		fmt.Sscan(f[2], &n)
		acked[id] = n
		if len(acked) == 40 && !killed {
			// Mid-stream: the child is inside its next Append right now.
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			killed = true
		}
	}
	err = cmd.Wait()
	if !killed {
		t.Fatalf("the writer ended before it was killed: %v", err)
	}
	s := open(t, path)
	ctx := context.Background()
	for id, n := range acked {
		tr, err := s.Trace(ctx, id)
		if err != nil {
			t.Fatalf("acknowledged trace %s lost: %v", id, err)
		}
		if len(tr.Records) != n {
			t.Fatalf("acknowledged trace %s: %d records stored, %d acknowledged", id, len(tr.Records), n)
		}
	}
	t.Logf("%d acknowledged batches all present after SIGKILL", len(acked))
}

// crashWriter appends one trace per batch forever, printing each
// acknowledged batch; the parent kills it.
func crashWriter(path string) {
	s, err := sqlite.Open(context.Background(), path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	for i := 0; ; i++ {
		recs := storetest.Gen(storetest.Spec{Start: time.Unix(int64(i), 0).UTC(), Steps: 25})
		if _, err := s.Append(context.Background(), recs); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		fmt.Fprintf(os.Stdout, "ack %s %d\n", recs[0].TraceID, len(recs))
	}
}
