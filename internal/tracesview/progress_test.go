package tracesview

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loupe-dev/loupe/store/sqlite"
	"github.com/loupe-dev/loupe/traceio"
)

// bigFile writes testdata/rag_demo.loupe.jsonl repeated up to at least
// size bytes (identical repeats store once) and returns its path.
func bigFile(t *testing.T, size int) string {
	t.Helper()
	one, err := os.ReadFile("testdata/rag_demo.loupe.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	b := bytes.Repeat(one, size/len(one)+1)
	path := filepath.Join(t.TempDir(), "big.jsonl")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestImportProgress(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "loupe.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	big := bigFile(t, ProgressMinSize)
	small := "testdata/rag_demo.loupe.jsonl"
	for _, tc := range []struct {
		file     string
		progress bool
		wantBar  bool
	}{
		{big, true, true},
		{small, true, false}, // too small to bother
		{big, false, false},  // no terminal
	} {
		var out, errw, progress bytes.Buffer
		var pw *bytes.Buffer
		if tc.progress {
			pw = &progress
		}
		var err error
		if pw != nil {
			err = ImportInputs(ctx, st, []ImportInput{{Name: tc.file}}, ImportOptions{Out: &out, Err: &errw, Progress: pw, Format: traceio.FormatAuto})
		} else {
			err = ImportInputs(ctx, st, []ImportInput{{Name: tc.file}}, ImportOptions{Out: &out, Err: &errw, Format: traceio.FormatAuto})
		}
		if err != nil {
			t.Fatalf("%s: %v\n%s", tc.file, err, errw.String())
		}
		gotBar := strings.Contains(progress.String(), "importing "+filepath.Base(tc.file)) && strings.Contains(progress.String(), "% |")
		if gotBar != tc.wantBar {
			t.Errorf("%s (progress %v): bar shown %v, want %v: %q", tc.file, tc.progress, gotBar, tc.wantBar, progress.String())
		}
		if !strings.Contains(out.String(), "loupe, ") || errw.Len() != 0 {
			t.Errorf("%s: stdout %q stderr %q", tc.file, out.String(), errw.String())
		}
	}
}
