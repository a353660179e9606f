package main

import (
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

func TestVersionCommandAndFlag(t *testing.T) {
	code, byCmd, _ := runLoupe(t, "version")
	if code != 0 {
		t.Fatalf("loupe version exited %d", code)
	}
	code, byFlag, _ := runLoupe(t, "--version")
	if code != 0 {
		t.Fatalf("loupe --version exited %d", code)
	}
	if byCmd != byFlag {
		t.Errorf("loupe version printed %q, loupe --version %q", byCmd, byFlag)
	}
	if !strings.HasPrefix(byCmd, "loupe ") || !strings.Contains(byCmd, runtime.Version()) || strings.Contains(byCmd, "(devel)") {
		t.Errorf("loupe version: %q", byCmd)
	}
}

func TestFormatVersion(t *testing.T) {
	vcs := []debug.BuildSetting{
		{Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"},
		{Key: "vcs.time", Value: "2026-11-20T10:00:00Z"},
		{Key: "vcs.modified", Value: "false"},
	}
	for _, tc := range []struct {
		name          string
		bi            *debug.BuildInfo
		ldVer, ldDate string
		want          string
	}{
		{"released", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v0.3.1"}}, "", "",
			"v0.3.1 (go1.26.0)"},
		{"checkout with vcs", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"}, Settings: vcs}, "", "",
			"devel (commit 0123456789ab, committed 2026-11-20T10:00:00Z, go1.26.0)"},
		{"modified checkout", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"},
			Settings: append(vcs[:2:2], debug.BuildSetting{Key: "vcs.modified", Value: "true"})}, "", "",
			"devel (commit 0123456789ab (modified), committed 2026-11-20T10:00:00Z, go1.26.0)"},
		{"pseudo-version from go install @commit", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v0.0.0-20261120100000-0123456789ab"}}, "", "",
			"v0.0.0-20261120100000-0123456789ab (go1.26.0)"},
		{"ldflags", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"}, Settings: vcs}, "v1.0.0", "2026-11-21",
			"v1.0.0 (commit 0123456789ab, built 2026-11-21, go1.26.0)"},
		{"no vcs", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"}}, "", "",
			"devel (built from a checkout without version control information) (go1.26.0)"},
		{"no build info", nil, "", "", "devel (built from a checkout without version control information)"},
	} {
		if got := formatVersion(tc.bi, tc.ldVer, tc.ldDate); got != tc.want {
			t.Errorf("%s:\n got %q\nwant %q", tc.name, got, tc.want)
		}
	}
}

func TestSelfCommand(t *testing.T) {
	dir := t.TempDir()
	onPath := dir + "/loupe"
	if err := os.WriteFile(onPath, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	found := func(string) (string, error) { return onPath, nil }
	missing := func(string) (string, error) { return "", exec.ErrNotFound }
	for _, tc := range []struct {
		arg0 string
		look func(string) (string, error)
		want string
	}{
		{"/tmp/go-build123/b001/exe/loupe", found, "go run ./cmd/loupe"},
		{"loupe", found, "loupe"},
		{onPath, found, "loupe"},
		{"./bin/loupe", found, "./bin/loupe"}, // another loupe is on PATH
		{"./bin/loupe", missing, "./bin/loupe"},
		{"/opt/my tools/loupe", missing, "'/opt/my tools/loupe'"},
	} {
		if got := selfCommandFor(tc.arg0, tc.look); got != tc.want {
			t.Errorf("selfCommandFor(%q) = %q, want %q", tc.arg0, got, tc.want)
		}
	}
}
