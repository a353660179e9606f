package dataset

import (
	"bytes"
	"os"
	"testing"
)

// FuzzImport feeds arbitrary files to Import: it must not panic, and what
// it accepts must export and import again to the same number of cases.
func FuzzImport(f *testing.F) {
	if b, err := os.ReadFile("testdata/agentv/export.eval.yaml"); err == nil {
		f.Add(b)
	}
	f.Add([]byte("tests:\n  - id: a\n    input: hi\n    assertions:\n      - type: tool-trajectory\n        mode: exact\n        expected: [{tool: x, args: {a: 1}}]\n"))
	f.Add([]byte("tests:\n  - id: a\n    input: [{role: user, content: hi}]\n    assert: [\"be nice\"]\n"))
	f.Add([]byte("tests: [{id: a, metadata: {loupe_trace: 7}}]"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cases, err := Import("fuzz.yaml", data)
		if err != nil {
			return
		}
		var buf bytes.Buffer
		if err := Export(&buf, "", cases); err != nil {
			t.Fatalf("an imported dataset does not export: %v", err)
		}
		back, err := Import("again.yaml", buf.Bytes())
		if err != nil {
			t.Fatalf("an export does not import: %v\n%s", err, buf.Bytes())
		}
		if len(back) != len(cases) {
			t.Fatalf("%d cases, then %d", len(cases), len(back))
		}
	})
}
