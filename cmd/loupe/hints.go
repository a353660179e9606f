package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
)

// selfCommand is how the user can run this loupe again, for the commands
// Loupe suggests ("see it again with: …"): "loupe" when that is on PATH
// and is this program, "go run ./cmd/loupe" under go run (whose binary is
// in a temporary build folder), else the path it was started by.
func selfCommand() string { return selfCommandFor(os.Args[0], exec.LookPath) }

func selfCommandFor(arg0 string, lookPath func(string) (string, error)) string {
	if strings.Contains(filepath.ToSlash(arg0), "/go-build") {
		return "go run ./cmd/loupe"
	}
	if p, err := lookPath("loupe"); err == nil {
		self, err1 := filepath.EvalSymlinks(p)
		arg, err2 := filepath.EvalSymlinks(arg0)
		if !strings.ContainsRune(arg0, filepath.Separator) || err1 == nil && err2 == nil && self == arg {
			return "loupe"
		}
	}
	if !strings.ContainsRune(arg0, filepath.Separator) {
		return arg0
	}
	return shellQuote(arg0)
}

// suggest returns a command line the user can paste: this loupe with
// --db when the command was given one (LOUPE_DB stays in the environment),
// then args.
func suggest(cmd *cobra.Command, args ...string) string {
	parts := []string{selfCommand()}
	if f := cmd.Flag("db"); f != nil && f.Changed {
		parts = append(parts, "--db", shellQuote(f.Value.String()))
	}
	return strings.Join(append(parts, args...), " ")
}

// shellQuote quotes s for a POSIX shell when it holds anything but
// common path characters.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:=+@,") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
