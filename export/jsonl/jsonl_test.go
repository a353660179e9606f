package jsonl_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loupe-dev/loupe/export/jsonl"
	"github.com/loupe-dev/loupe/internal/tracefix"
	"github.com/loupe-dev/loupe/trace"
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
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := jsonl.NewReader(f, path)
	var got []trace.Record
	for {
		rec, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, rec)
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

func TestReaderErrorsNameFileLineAndField(t *testing.T) {
	good := `{"v":1,"trace_id":"0102030405060708090a0b0c0d0e0f10","span_id":"0102030405060708","seq":1,"time":"2026-01-01T00:00:00Z","type":"custom","name":"x"}`
	in := good + "\n\n" + strings.Replace(good, `"seq":1`, `"seq":-1`, 1) + "\n" + good + "\n"
	r := jsonl.NewReader(strings.NewReader(in), "runs.jsonl")
	if _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	_, err := r.Next()
	var fe *trace.FieldError
	if err == nil || !strings.HasPrefix(err.Error(), "runs.jsonl:3: field seq") || !errors.As(err, &fe) {
		t.Fatalf("got %v, want runs.jsonl:3: field seq…", err)
	}
	if _, err := r.Next(); err != nil || r.Line() != 4 {
		t.Errorf("reader did not go on after a bad line: %v (line %d)", err, r.Line())
	}
	if _, err := r.Next(); err != io.EOF {
		t.Errorf("want EOF, got %v", err)
	}
}
