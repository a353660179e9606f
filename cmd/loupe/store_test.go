package main

import (
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loupe-dev/loupe/internal/testrepo"
)

// TestLoupeChild runs loupe with the arguments in LOUPE_CHILD_ARGS (JSON)
// when the test binary is re-executed as a child, e.g. as another user;
// otherwise it does nothing.
func TestLoupeChild(t *testing.T) {
	spec := os.Getenv("LOUPE_CHILD_ARGS")
	if spec == "" {
		return
	}
	var args []string
	if err := json.Unmarshal([]byte(spec), &args); err != nil {
		t.Fatal(err)
	}
	root := newRootCmd()
	root.SetArgs(args)
	if err := root.Execute(); err != nil {
		io.WriteString(os.Stderr, "loupe: "+err.Error()+"\n")
		os.Exit(exitCode(err))
	}
	os.Exit(0)
}

// entries lists what is in dir, for checking that nothing was created.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

func TestDBUnknownSchemeAndMissingStore(t *testing.T) {
	dir := t.TempDir()
	static := testrepo.Real(t, "agentv/static-trace.json")
	t.Chdir(dir)
	for _, tc := range []struct {
		db   string
		args []string
		want []string
	}{
		{"mysql://u@h/db", []string{"traces", "ls"}, []string{`unknown scheme "mysql"`, "SQLite file path", "postgres://"}},
		{"mysql://u@h/db", []string{"traces", "import", static}, []string{`unknown scheme "mysql"`}},
		{"sqlite://traces.db", []string{"traces", "import", static}, []string{`unknown scheme "sqlite"`, "--db ./traces.db"}},
		{"nostore/loupe.db", []string{"traces", "ls"}, []string{"no store exists at nostore/loupe.db", "--db nostore/loupe.db traces import FILE", "--db nostore/loupe.db demo"}},
		{"nostore/loupe.db", []string{"traces", "show", "abcd"}, []string{"no store exists at nostore/loupe.db"}},
		{"nostore/loupe.db", []string{"traces", "search", "x"}, []string{"no store exists at nostore/loupe.db"}},
		{"nostore/loupe.db", []string{"traces", "export"}, []string{"no store exists at nostore/loupe.db"}},
		{"loupe.db", []string{"traces", "ls"}, []string{"no store exists at loupe.db"}},
	} {
		_, _, err := run(t, tc.db, tc.args...)
		if err == nil {
			t.Errorf("--db %s %v succeeded", tc.db, tc.args)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("--db %s %v: error lacks %q: %v", tc.db, tc.args, w, err)
			}
		}
		if e := entries(t, dir); len(e) != 0 {
			t.Fatalf("--db %s %v created %v", tc.db, tc.args, e)
		}
	}
}

// TestReadOnlyStore reads a store whose folder and file the user may only
// read, as a non-root user: ls, show, search and export work, import fails
// with a message naming the store.
func TestReadOnlyStore(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "store")
	db := filepath.Join(dir, "loupe.db")
	mustRun(t, db, "traces", "import", testrepo.Real(t, "agentv/static-trace.json"))

	// asUser runs loupe as the test's unprivileged user: in-process when
	// the test is not root, else in a copy of the test binary under
	// runuser -u nobody.
	asUser := func(args ...string) (string, string, error) { return run(t, db, args...) }
	if os.Geteuid() == 0 {
		runuser, err := exec.LookPath("runuser")
		if err != nil {
			testrepo.Missing(t, "running as root and runuser is missing: cannot test a read-only store as a non-root user")
		}
		bin := filepath.Join(base, "loupe.test")
		copyFile(t, os.Args[0], bin, 0o755)
		// t.TempDir makes its folders 0700: let nobody in.
		for _, d := range []string{filepath.Dir(base), base} {
			if err := os.Chmod(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		asUser = func(args ...string) (string, string, error) {
			spec, _ := json.Marshal(append([]string{"--db", db}, args...))
			cmd := exec.Command(runuser, "-u", "nobody", "--", bin, "-test.run=^TestLoupeChild$")
			cmd.Env = append(os.Environ(), "LOUPE_CHILD_ARGS="+string(spec))
			cmd.Dir = base // the checkout may be in a folder nobody cannot enter
			var out, errOut strings.Builder
			cmd.Stdout, cmd.Stderr = &out, &errOut
			err := cmd.Run()
			return out.String(), errOut.String(), err
		}
	}

	for _, mode := range []struct {
		name           string
		dirMode, dbMod os.FileMode
	}{
		{"folder 555 and file 444", 0o555, 0o444},
		{"file 444 in a writable folder", 0o777, 0o444},
	} {
		t.Run(mode.name, func(t *testing.T) {
			if err := os.Chmod(db, mode.dbMod); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(dir, mode.dirMode); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.Chmod(dir, 0o755); os.Chmod(db, 0o644) })
			for _, c := range []struct {
				args []string
				want string
			}{
				{[]string{"traces", "ls"}, "static-trace"},
				{[]string{"traces", "show", "b034"}, "static-trace  success"},
				{[]string{"traces", "search", "ThinkPad"}, "tool.start webSearch"},
				{[]string{"traces", "export"}, `"type":"run.start"`},
			} {
				out, errOut, err := asUser(c.args...)
				if err != nil || !strings.Contains(out, c.want) {
					t.Errorf("%v: %v\nstdout:\n%s\nstderr:\n%s", c.args, err, out, errOut)
				}
			}
			_, errOut, err := asUser("traces", "import", testrepo.Real(t, "omni/session_rag_demo.trace.json"))
			if err == nil {
				t.Fatal("import into a read-only store succeeded")
			}
			if !strings.Contains(errOut+err.Error(), db) || !strings.Contains(errOut+err.Error(), "you may only read this store") {
				t.Errorf("import error does not name the store or say it is read-only: %v\n%s", err, errOut)
			}
			if mode.dirMode == 0o555 {
				if e := entries(t, dir); len(e) != 1 {
					t.Errorf("the read-only folder now holds %v", e)
				}
			}
		})
	}
}

func copyFile(t *testing.T, from, to string, mode os.FileMode) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, mode); err != nil {
		t.Fatal(err)
	}
}
