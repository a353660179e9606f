package server

import (
	"context"
	"encoding/binary"
	"net"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/loupe-dev/loupe/otlp"
)

// grpcEnv is a collector serving OTLP/gRPC on a real TCP listener on
// 127.0.0.1, with a client connection to it.
type grpcEnv struct {
	*env
	conn   *grpc.ClientConn
	client ptraceotlp.GRPCClient
	addr   string     // host:port
	done   chan error // ServeGRPCListener's result
}

func newGRPCEnv(t *testing.T, o Options) *grpcEnv {
	t.Helper()
	e := newEnv(t, o)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ServeGRPCListener(ctx, ln, e.srv, nil) }()
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("ServeGRPCListener: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("ServeGRPCListener did not return after its context ended")
		}
	})
	return &grpcEnv{env: e, conn: conn, client: ptraceotlp.NewGRPCClient(conn), addr: ln.Addr().String(), done: done}
}

// export sends td with key (if not empty) as the authorization metadata.
func (g *grpcEnv) export(td ptrace.Traces, key string, opts ...grpc.CallOption) (ptraceotlp.ExportResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if key != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+key)
	}
	return g.client.Export(ctx, ptraceotlp.NewExportRequestFromTraces(td), opts...)
}

// exportRaw sends b, an encoded request, as it is (it may not be valid
// OTLP, or be too deep for pdata to decode on this side).
func (g *grpcEnv) exportRaw(b []byte, opts ...grpc.CallOption) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	in, out := rawMessage(b), rawMessage(nil)
	return g.conn.Invoke(ctx, grpcTraceMethod, &in, &out, append(opts, grpc.ForceCodecV2(rawCodec{}))...)
}

func wantCode(t *testing.T, what string, err error, code codes.Code, text string) {
	t.Helper()
	st, _ := status.FromError(err)
	if st.Code() != code || !strings.Contains(st.Message(), text) {
		t.Errorf("%s: %v, want %s with %q", what, err, code, text)
	}
}

// TestGRPCExport: spans exported over OTLP/gRPC (plain and gzip) are
// stored as over OTLP/HTTP, and spans that cannot be mapped are reported
// in the partial success.
func TestGRPCExport(t *testing.T) {
	g := newGRPCEnv(t, Options{})
	td, _ := otlpFile(t, "genai.json")
	want := otlp.Map(td, nil).Records
	for _, gzip := range []bool{false, true} {
		var opts []grpc.CallOption
		if gzip {
			opts = append(opts, grpc.UseCompressor("gzip"))
		}
		resp, err := g.export(td, "", opts...)
		if err != nil {
			t.Fatalf("gzip %v: %v", gzip, err)
		}
		if ps := resp.PartialSuccess(); ps.RejectedSpans() != 0 || ps.ErrorMessage() != "" {
			t.Errorf("gzip %v: partial success %d %q", gzip, ps.RejectedSpans(), ps.ErrorMessage())
		}
		got, err := g.st.Trace(context.Background(), want[0].TraceID)
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Records) != len(want) {
			t.Errorf("gzip %v: %d records stored, want %d", gzip, len(got.Records), len(want))
		}
	}

	// A span without ids is rejected; the other one is stored.
	bad := ptrace.NewTraces()
	spans := bad.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans()
	spans.AppendEmpty().SetName("no ids")
	ok := spans.AppendEmpty()
	ok.SetName("execute_tool search")
	ok.SetTraceID(pcommon.TraceID{1, 2, 3})
	ok.SetSpanID(pcommon.SpanID{4, 5, 6})
	ok.SetStartTimestamp(pcommon.NewTimestampFromTime(time.Now()))
	ok.SetEndTimestamp(pcommon.NewTimestampFromTime(time.Now()))
	ok.Attributes().PutStr("gen_ai.operation.name", "execute_tool")
	ok.Attributes().PutStr("gen_ai.tool.name", "search")
	resp, err := g.export(bad, "")
	if err != nil {
		t.Fatal(err)
	}
	if ps := resp.PartialSuccess(); ps.RejectedSpans() != 1 || ps.ErrorMessage() == "" {
		t.Errorf("partial success: %d %q, want 1 rejected span", ps.RejectedSpans(), ps.ErrorMessage())
	}
	if got, err := g.st.Trace(context.Background(), otlp.Map(bad, nil).Records[0].TraceID); err != nil || len(got.Records) == 0 {
		t.Errorf("the good span of a partial success: %v %+v", err, got)
	}

	// Not protobuf at all.
	wantCode(t, "garbage", g.exportRaw([]byte{0xff, 0xff, 0xff}), codes.InvalidArgument, "not OTLP protobuf")
}

// TestGRPCKeys: with keys required, an export needs an ingest or admin
// key in the authorization metadata.
func TestGRPCKeys(t *testing.T) {
	st := openStore(t)
	keys := map[Scope]string{}
	for _, sc := range []Scope{ScopeIngest, ScopeRead, ScopeAdmin} {
		k, _, err := CreateKey(context.Background(), st, sc, string(sc), time.Now())
		if err != nil {
			t.Fatal(err)
		}
		keys[sc] = k
	}
	g := newGRPCEnv(t, Options{Store: st, RequireKeys: true})
	td, _ := otlpFile(t, "genai.json")
	_, err := g.export(td, "")
	wantCode(t, "no key", err, codes.Unauthenticated, "requires an API key")
	_, err = g.export(td, "lk_0123456789abcdef_nope")
	wantCode(t, "wrong key", err, codes.Unauthenticated, "unknown or revoked API key")
	_, err = g.export(td, "not-a-key")
	wantCode(t, "malformed key", err, codes.Unauthenticated, "malformed API key")
	_, err = g.export(td, keys[ScopeRead])
	wantCode(t, "read key", err, codes.PermissionDenied, "scope read")
	// Refused before the message is read: a deep one gets the same answer.
	wantCode(t, "deep, no key", g.exportRaw(nestedRequest(1000)), codes.Unauthenticated, "requires an API key")
	for _, sc := range []Scope{ScopeIngest, ScopeAdmin} {
		if _, err := g.export(td, keys[sc]); err != nil {
			t.Errorf("%s key: %v", sc, err)
		}
	}
	if _, err := g.st.Trace(context.Background(), otlp.Map(td, nil).Records[0].TraceID); err != nil {
		t.Errorf("stored: %v", err)
	}
}

// TestGRPCDeep: a request whose attribute values nest a million levels
// deep (a few MB, far less gzip) would overflow pdata's decoder: it is
// refused with InvalidArgument before pdata sees it, and the server keeps
// serving.
func TestGRPCDeep(t *testing.T) {
	g := newGRPCEnv(t, Options{})
	deep := nestedRequest(1_000_000)
	wantCode(t, "deep", g.exportRaw(deep, grpc.UseCompressor("gzip")), codes.InvalidArgument, "nested deeper")
	wantCode(t, "deep, plain", g.exportRaw(deep), codes.InvalidArgument, "nested deeper")
	// Just within the bound is accepted (no spans: nothing to store).
	if err := g.exportRaw(nestedRequest(otlp.MaxNesting - 1)); err != nil {
		t.Errorf("shallow: %v", err)
	}
	td, _ := otlpFile(t, "genai.json")
	if _, err := g.export(td, ""); err != nil {
		t.Errorf("after the deep request: %v", err)
	}
}

// TestGRPCOversized: a message over MaxDecodedBytes is refused with
// ResourceExhausted, as sent and after gzip (a bomb).
func TestGRPCOversized(t *testing.T) {
	g := newGRPCEnv(t, Options{MaxDecodedBytes: 4 << 10})
	td := ptrace.NewTraces()
	sp := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	sp.SetTraceID(pcommon.TraceID{9})
	sp.SetSpanID(pcommon.SpanID{9})
	sp.SetStartTimestamp(pcommon.NewTimestampFromTime(time.Now()))
	sp.Attributes().PutStr("big", strings.Repeat("x", 64<<10))
	_, err := g.export(td, "")
	wantCode(t, "oversized", err, codes.ResourceExhausted, "")
	_, err = g.export(td, "", grpc.UseCompressor("gzip")) // 64 KiB of x: well under 4 KiB compressed
	wantCode(t, "oversized, gzip", err, codes.ResourceExhausted, "")
	small, _ := otlpFile(t, "genai.json")
	if _, err := g.export(small, ""); err != nil {
		t.Errorf("a small export after: %v", err)
	}
}

// TestGRPCStoreFailure: a store that fails is Unavailable (retryable),
// and the answer names nothing of the store.
func TestGRPCStoreFailure(t *testing.T) {
	g := newGRPCEnv(t, Options{})
	g.st.Close()
	td, _ := otlpFile(t, "genai.json")
	_, err := g.export(td, "")
	wantCode(t, "closed store", err, codes.Unavailable, "retry later")
	if m := status.Convert(err).Message(); strings.Contains(m, ".db") || strings.Contains(strings.ToLower(m), "sql") {
		t.Errorf("the answer leaks the store: %q", m)
	}
}

// TestGRPCDeadline: an export whose deadline has passed is refused, and
// the request bound is set on the server.
func TestGRPCDeadline(t *testing.T) {
	g := newGRPCEnv(t, Options{})
	td, _ := otlpFile(t, "genai.json")
	ctx, cancel := context.WithTimeout(context.Background(), time.Nanosecond)
	defer cancel()
	time.Sleep(time.Millisecond)
	_, err := g.client.Export(ctx, ptraceotlp.NewExportRequestFromTraces(td))
	wantCode(t, "expired", err, codes.DeadlineExceeded, "")
	ctx, err2 := boundRequest(context.Background(), nil)
	if dl, ok := ctx.Deadline(); err2 != nil || !ok || time.Until(dl) > GRPCRequestTimeout {
		t.Errorf("boundRequest: %v %v %v", dl, ok, err2)
	}
}

// TestServeGRPC: ServeGRPC serves until its context ends, then returns
// nil; an address it cannot listen on is an error.
func TestServeGRPC(t *testing.T) {
	e := newEnv(t, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	addrc := make(chan net.Addr, 1)
	done := make(chan error, 1)
	go func() { done <- ServeGRPC(ctx, "127.0.0.1:0", e.srv, func(a net.Addr) { addrc <- a }) }()
	a := <-addrc
	conn, err := grpc.NewClient(a.String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	td, _ := otlpFile(t, "genai.json")
	if _, err := ptraceotlp.NewGRPCClient(conn).Export(context.Background(), ptraceotlp.NewExportRequestFromTraces(td)); err != nil {
		t.Fatal(err)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("ServeGRPC: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("ServeGRPC did not return")
	}
	if err := ServeGRPC(context.Background(), "127.0.0.1:-1", e.srv, nil); err == nil {
		t.Error("ServeGRPC on a bad address: no error")
	}
}

// nestedRequest returns an ExportTraceServiceRequest whose resource has
// one attribute, an array nested levels deep around "x" (built as
// otlp/depth_test.go's nestedProto is).
func nestedRequest(levels int) []byte {
	inner := []byte{0x0a, 1, 'x'} // AnyValue{string_value: "x"}
	type size struct{ av, arr int }
	sizes := make([]size, levels)
	cur := len(inner)
	uvlen := func(n int) int { return len(binary.AppendUvarint(nil, uint64(n))) }
	for i := range levels {
		arr := 1 + uvlen(cur) + cur // ArrayValue{values: …}
		av := 1 + uvlen(arr) + arr  // AnyValue{array_value: …}
		sizes[i] = size{av, arr}
		cur = av
	}
	kv := []byte{0x0a, 1, 'k', 0x12} // KeyValue{key: "k", value: …}
	kv = binary.AppendUvarint(kv, uint64(cur))
	for i := levels - 1; i >= 0; i-- {
		kv = append(kv, 0x2a)
		kv = binary.AppendUvarint(kv, uint64(sizes[i].arr))
		kv = append(kv, 0x0a)
		in := len(inner)
		if i > 0 {
			in = sizes[i-1].av
		}
		kv = binary.AppendUvarint(kv, uint64(in))
	}
	kv = append(kv, inner...)
	field1 := func(body []byte) []byte {
		return append(binary.AppendUvarint([]byte{0x0a}, uint64(len(body))), body...)
	}
	return field1(field1(field1(kv))) // request{resource_spans{resource{attributes}}}
}
