package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPricesLs(t *testing.T) {
	t.Setenv("LOUPE_PRICES", "")
	over := filepath.Join(t.TempDir(), "prices.json")
	if err := os.WriteFile(over, []byte(`{"models":[{"model":"qwen3","aliases":["qwen3:8b"],"input":0,"output":0}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args    []string
		code    int
		want    []string
		wantErr string
	}{
		{args: []string{"prices", "ls"}, want: []string{"MODEL", "gpt-4o ", "claude-sonnet-4-5 ", "$3.75"}},
		{args: []string{"prices", "ls", "claude-sonnet-4-5-20250929"}, want: []string{"claude-sonnet-4-5  anthropic  $3     $0.3         $3.75        $15"}},
		{args: []string{"prices", "ls", "--json", "gpt-4o-2024-08-06"}, want: []string{`"model": "gpt-4o"`, `"input": 2.5`}},
		{args: []string{"prices", "ls", "qwen3:8b"}, code: 1, wantErr: "its cost is unknown"},
		{args: []string{"prices", "ls", "--prices", over, "qwen3:8b"}, want: []string{"qwen3 ", "$0"}},
		{args: []string{"prices", "ls", "--prices", filepath.Join(t.TempDir(), "none.json")}, code: 1, wantErr: "no such file"},
	} {
		code, out, errs := runLoupe(t, tc.args...)
		if code != tc.code || !strings.Contains(errs, tc.wantErr) {
			t.Errorf("%v: exit %d, stderr %q; want %d, %q", tc.args, code, errs, tc.code, tc.wantErr)
		}
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("%v: output lacks %q:\n%s", tc.args, w, out)
			}
		}
	}
}
