package main

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestServeMonitors: loupe serve --monitors stores the file's monitors,
// which the API then lists; a bad file stops it with the place at fault.
func TestServeMonitors(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "m.db")
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("monitors:\n  - name: errors\n    metric: error_rate\n    window: 5m\n    threshold: 0.2\n    resolve: 0.5\n"), 0o600)
	if _, _, err := run(t, db, "serve", "--addr", "127.0.0.1:0", "--monitors", bad); err == nil || !strings.Contains(err.Error(), "bad.yaml:6:14: monitor \"errors\": resolve:") {
		t.Fatalf("serve with a bad monitors file: %v", err)
	}
	good := filepath.Join(dir, "monitors.yaml")
	os.WriteFile(good, []byte("monitors:\n  - name: errors\n    metric: error_rate\n    window: 5m\n    threshold: 0.2\n    webhooks:\n      - url: https://hooks.example.com/services/T0/B0/SECRET\n"), 0o600)
	cmd, url := startChild(t, "--db", db, "serve", "--addr", "127.0.0.1:0", "--monitors", good)
	resp, err := http.Get(url + "/api/v1/monitors")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"name":"errors"`) || strings.Contains(string(b), "SECRET") {
		t.Errorf("GET /api/v1/monitors: %d %s", resp.StatusCode, b)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Errorf("loupe serve after SIGTERM: %v", err)
	}
}
