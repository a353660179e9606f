// Package testrepo finds the repository root and the real input files kept
// in it (testdata/real, see testdata/real/README.md), for tests in any
// package.
package testrepo

import (
	"os"
	"path/filepath"
	"testing"
)

// Root returns the repository root: the nearest directory at or above the
// working directory that holds go.mod. It fails t when there is none.
func Root(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found at or above the test's directory")
		}
		dir = parent
	}
}

// Chdir makes the repository root the working directory for the rest of
// the test (see testing.T.Chdir), so that paths read as in the docs.
func Chdir(t testing.TB) {
	t.Helper()
	t.Chdir(Root(t))
}

// Real returns the path of the real input rel (slash-separated, e.g.
// "agentv/static-trace.json") under the repository's testdata/real, or of
// that directory itself when rel is "". The files are part of the
// repository, so a plain clone has them.
func Real(t testing.TB, rel string) string {
	t.Helper()
	return filepath.Join(Root(t), "testdata", "real", filepath.FromSlash(rel))
}

// Missing reports that something a test needs (a program, a package from
// npm, a server) is not there, msg saying what and how to install it. It
// skips the test, except under CI=true, where the test command should
// have installed it: then the test fails, so that CI never passes by
// skipping. It does not return.
func Missing(t testing.TB, msg string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s (CI=true: scripts/test.sh should have installed it)", msg)
	}
	t.Skip(msg)
}
