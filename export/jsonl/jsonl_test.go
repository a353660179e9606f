package jsonl_test

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/loupe-dev/loupe/export/jsonl"
	"github.com/loupe-dev/loupe/internal/tracefix"
	"github.com/loupe-dev/loupe/trace"
	"github.com/loupe-dev/loupe/traceio"
)

func TestFileRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "run.jsonl")
	sink, err := jsonl.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	tr := trace.New(trace.Options{Sinks: []trace.Sink{sink}, Now: tracefix.Clock(time.Millisecond)})
	want := tracefix.Record(tr).Records()
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	got, format, err := traceio.ReadFile(path, traceio.FormatAuto)
	if err != nil || format != traceio.FormatLoupe {
		t.Fatalf("reading %s back: format %s, %v", path, format, err)
	}
	if len(got) != len(want) {
		t.Fatalf("read %d records, wrote %d", len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(got[i].AppendJSON(nil), want[i].AppendJSON(nil)) {
			t.Errorf("record %d changed:\n%s\n%s", i, want[i].AppendJSON(nil), got[i].AppendJSON(nil))
		}
	}
	if err := sink.WriteRecords(context.Background(), want[:1]); err == nil {
		t.Error("write after Close succeeded")
	}
}
