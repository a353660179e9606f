package storetest

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/trace"
)

// CrashWriterEnv carries the writer's store to the test binary that
// KillMidIngest re-executes; a test can read it to skip its own setup there.
const CrashWriterEnv = "LOUPE_TEST_CRASH_WRITER"

// KillMidIngest checks that a writer killed with SIGKILL in the middle of
// ingest loses nothing it had acknowledged. It re-executes the running test
// binary with -test.run=^testName$ as a writer process that appends one
// trace per batch into the store at dsn (opened with open) and prints each
// batch once Append returned nil; it kills the writer after 40
// acknowledged batches, while it is inside the next Append, then opens the
// store again and checks every acknowledged batch is there, whole.
//
// Call it first thing in the test named testName: in the writer process it
// runs the writer and never returns.
func KillMidIngest(t *testing.T, testName, dsn string, open func(ctx context.Context, dsn string) (store.Store, error)) {
	if target := os.Getenv(CrashWriterEnv); target != "" {
		crashWriter(target, open)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+testName+"$")
	cmd.Env = append(os.Environ(), CrashWriterEnv+"="+dsn)
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
			// Mid-stream: the writer is inside its next Append right now.
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
	ctx := context.Background()
	s, err := open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
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

// crashWriter appends one trace per batch until it is killed, printing each
// acknowledged batch.
func crashWriter(dsn string, open func(ctx context.Context, dsn string) (store.Store, error)) {
	s, err := open(context.Background(), dsn)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	for i := 0; ; i++ {
		recs := Gen(Spec{Start: time.Unix(int64(i), 0).UTC(), Steps: 25})
		if _, err := s.Append(context.Background(), recs); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		fmt.Fprintf(os.Stdout, "ack %s %d\n", recs[0].TraceID, len(recs))
	}
}
