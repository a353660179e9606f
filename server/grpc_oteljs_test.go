package server

import (
	"context"
	"encoding/json"
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
	send := func(key string) ([]byte, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, node, "send.mjs", "http://"+g.addr, "grpc", key)
		cmd.Dir = otelJS
		cmd.Env = append(os.Environ(), "OTEL_LOG_LEVEL=none")
		return cmd.Output()
	}
	out, err := send(key)
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("node send.mjs grpc: %v\n%s", err, stderr)
	}
	var sent struct {
		TraceID string            `json:"trace_id"`
		Spans   map[string]string `json:"spans"`
	}
	if err := json.Unmarshal(out, &sent); err != nil {
		t.Fatalf("send.mjs printed %q: %v", out, err)
	}
	id, _ := trace.ParseTraceID(sent.TraceID)
	got, err := st.Trace(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	bySpan := map[string][]trace.Record{}
	for _, r := range got.Records {
		bySpan[r.SpanID.String()] = append(bySpan[r.SpanID.String()], r)
	}
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
