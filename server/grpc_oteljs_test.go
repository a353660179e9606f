package server

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loupe-dev/loupe/internal/testrepo"
	"github.com/loupe-dev/loupe/trace"
)

// TestOTelJSSDKGRPC sends GenAI and OpenInference spans with the
// OpenTelemetry JS SDK's OTLP/gRPC exporter
// (@opentelemetry/exporter-trace-otlp-grpc, gzip, the API key in the
// metadata from OTEL_EXPORTER_OTLP_TRACES_HEADERS) to the collector's gRPC
// port, and checks what was stored.
func TestOTelJSSDKGRPC(t *testing.T) {
	node := needOTelJS(t)
	if _, err := os.Stat(filepath.Join(otelJS, "node_modules", "@opentelemetry", "exporter-trace-otlp-grpc")); err != nil {
		testrepo.Missing(t, "the OpenTelemetry JS gRPC exporter is not installed (run scripts/otel-js.sh; scripts/test.sh does)")
	}
	st := openStore(t)
	key, _, err := CreateKey(context.Background(), st, ScopeIngest, "js-grpc", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	g := newGRPCEnv(t, Options{Store: st, RequireKeys: true})
	send := func(key string) ([]byte, error) { return sendJS(node, "http://"+g.addr, "grpc", key) }
	out, err := send(key)
	if err != nil {
		t.Fatalf("node send.mjs grpc: %v\n%s", err, stderrOf(err))
	}
	sent, got, bySpan := storedBySpan(t, st, out)
	for name, n := range map[string]int{"invoke_agent travel": 2, "chat gpt-4o-mini": 1, "execute_tool weather": 2, "execute_tool book": 2, "ChatModel": 1, "lookup": 2} {
		if len(bySpan[sent.Spans[name]]) != n {
			t.Errorf("span %q: %d records, want %d", name, len(bySpan[sent.Spans[name]]), n)
		}
	}
	if mc := bySpan[sent.Spans["chat gpt-4o-mini"]]; len(mc) == 1 && (mc[0].Type != trace.TypeModelCall || mc[0].Name != "gpt-4o-mini" || mc[0].Usage.InputTokens != 200) {
		t.Errorf("chat: %+v", mc[0])
	}
	if got.Summary.ToolCalls != 3 || got.Summary.ModelCalls != 2 || got.Summary.Errors != 1 || got.Summary.Name != "travel" {
		t.Errorf("summary: %+v", got.Summary)
	}

	// Without the key, the export is refused with Unauthenticated, which
	// the SDK reports (send.mjs fails).
	_, err = send("")
	var ee *exec.ExitError
	if !errors.As(err, &ee) || !strings.Contains(string(ee.Stderr), "requires an API key") {
		t.Errorf("an export without a key: %v", err)
	}
}
