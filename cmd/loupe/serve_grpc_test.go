package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestDefaultGRPCAddr: OTLP/gRPC is on 4317 of --addr's host when that
// is loopback, on port 0 with --addr on port 0, and off otherwise.
func TestDefaultGRPCAddr(t *testing.T) {
	for addr, want := range map[string]string{
		"127.0.0.1:4318": "127.0.0.1:4317",
		"localhost:9000": "localhost:4317",
		"[::1]:4318":     "[::1]:4317",
		"127.0.0.1:0":    "127.0.0.1:0",
		"0.0.0.0:4318":   "",
		":4318":          "",
		"10.0.0.1:4318":  "",
		"bad":            "",
	} {
		if got := defaultGRPCAddr(addr); got != want {
			t.Errorf("defaultGRPCAddr(%q) = %q, want %q", addr, got, want)
		}
	}
}

// TestServeGRPCNeedsKeys: a non-loopback --grpc-addr requires API keys,
// as a non-loopback --addr does.
func TestServeGRPCNeedsKeys(t *testing.T) {
	db := filepath.Join(t.TempDir(), "serve.db")
	_, _, err := run(t, db, "serve", "--addr", "127.0.0.1:0", "--grpc-addr", "0.0.0.0:0")
	if err == nil || !strings.Contains(err.Error(), "requires API keys") || !strings.Contains(err.Error(), "0.0.0.0:0") {
		t.Fatalf("serve --grpc-addr 0.0.0.0:0 without keys: %v", err)
	}
}
