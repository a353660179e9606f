// Package golden compares test output with golden files, and rewrites them
// when the tests run with -update (or UPDATE_GOLDEN=1 in the environment).
//
// Importing it registers the -update test flag, so a test package that
// uses it must not define its own.
package golden

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files instead of comparing with them")

// Updating reports whether golden files are being rewritten: -update was
// given or UPDATE_GOLDEN is set. It is meaningful once flags are parsed,
// that is inside a test.
func Updating() bool { return *update || os.Getenv("UPDATE_GOLDEN") != "" }

// Check compares got with testdata/name and fails t if they differ. See
// CheckFile.
func Check(t testing.TB, name string, got []byte) {
	t.Helper()
	CheckFile(t, filepath.Join("testdata", name), got)
}

// CheckFile compares got with the file at path (relative to the working
// directory) and fails t if they differ. When Updating, it writes got to
// the file first, creating its directory.
func CheckFile(t testing.TB, path string, got []byte) {
	t.Helper()
	if Updating() {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run the test with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("output differs from %s (run the test with -update to accept it); got:\n%s", path, got)
	}
}
