package server

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"runtime/debug"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	_ "google.golang.org/grpc/encoding/gzip" // registers the gzip compressor: OTLP exporters may compress
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"

	"github.com/loupe-dev/loupe/store"
)

// GRPCRequestTimeout bounds one OTLP/gRPC export, from its headers to its
// answer, as the HTTP server's ReadTimeout bounds a body: a client that
// sends its message slowly (or never) holds a stream no longer than this.
// A shorter deadline of the client's own applies too.
const GRPCRequestTimeout = 2 * time.Minute

// OTLP's export methods.
const (
	grpcTraceMethod = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
	grpcLogsMethod  = "/opentelemetry.proto.collector.logs.v1.LogsService/Export"
)

// NewGRPC returns a gRPC server that serves OTLP/gRPC's trace and logs
// exports (opentelemetry.proto.collector.trace.v1.TraceService/Export and
// opentelemetry.proto.collector.logs.v1.LogsService/Export) into s, as
// POST /v1/traces and POST /v1/logs do over HTTP: the same API keys (metadata
// "authorization: Bearer lk_…", scope ingest or admin, when
// Options.RequireKeys), the same size limit (Options.MaxDecodedBytes,
// after gzip), the same nesting guard before pdata decodes, the same
// mapping, partial success and store errors. Serve it with ServeGRPC, or
// with grpc.Server.Serve on a listener of your own.
//
// The service is not pdata's ptraceotlp.RegisterGRPCServer: that one
// decodes the request in its codec before any handler runs, recursing
// without a limit. Here a codec of this server alone hands the handler the
// message's raw bytes, which go through otlp.DecodeProto or
// otlp.DecodeLogsProto (guard, then pdata), and takes the answer as raw
// bytes (exportResponse).
func NewGRPC(s *Server) *grpc.Server {
	limit := s.o.MaxDecodedBytes
	if limit > math.MaxInt32 {
		limit = math.MaxInt32
	}
	gs := grpc.NewServer(
		grpc.ForceServerCodecV2(rawCodec{}),
		grpc.MaxRecvMsgSize(int(limit)), // checked as sent and again after gzip: no bombs
		grpc.InTapHandle(boundRequest),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
		grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionIdle: 10 * time.Minute}),
	)
	gs.RegisterService(&grpcTraceService, s)
	gs.RegisterService(&grpcLogsService, s)
	return gs
}

// boundRequest gives every stream GRPCRequestTimeout to arrive and be
// answered. It runs before the message is read (the stream's receive ends
// with its context), which a deadline set in the handler would not do.
func boundRequest(ctx context.Context, _ *tap.Info) (context.Context, error) {
	ctx, cancel := context.WithTimeout(ctx, GRPCRequestTimeout)
	context.AfterFunc(ctx, cancel) // the stream's end, or the deadline, releases the timer
	return ctx, nil
}

// ServeGRPC listens on addr and serves s over OTLP/gRPC (see NewGRPC)
// until ctx is done; then it stops accepting connections, lets the
// exports in flight finish (up to ShutdownTimeout; the others are cut
// off) and returns nil. ready, if not nil, is called with the address
// actually listened on once connections are accepted.
func ServeGRPC(ctx context.Context, addr string, s *Server, ready func(addr net.Addr)) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	return ServeGRPCListener(ctx, ln, s, ready)
}

// ServeGRPCListener is ServeGRPC on a listener of the caller's; it closes
// ln.
func ServeGRPCListener(ctx context.Context, ln net.Listener, s *Server, ready func(addr net.Addr)) error {
	gs := NewGRPC(s)
	errc := make(chan error, 1)
	go func() { errc <- gs.Serve(ln) }()
	if ready != nil {
		ready(ln.Addr())
	}
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	stopped := make(chan struct{})
	go func() { gs.GracefulStop(); close(stopped) }()
	t := time.NewTimer(ShutdownTimeout)
	defer t.Stop()
	select {
	case <-stopped:
	case <-t.C:
		gs.Stop() // cuts the connections; GracefulStop then returns
		<-stopped
	}
	if err := <-errc; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return err
	}
	return nil
}

// grpcExporter is what the service's handler needs of its server.
type grpcExporter interface {
	exportGRPC(ctx context.Context, dec func(any) error) (*rawMessage, error)
	exportLogsGRPC(ctx context.Context, dec func(any) error) (*rawMessage, error)
}

// grpcTraceService is OTLP's TraceService, with a handler that receives
// the request undecoded (see rawCodec).
var grpcTraceService = grpc.ServiceDesc{
	ServiceName: "opentelemetry.proto.collector.trace.v1.TraceService",
	HandlerType: (*grpcExporter)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Export",
		Handler: func(srv any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			return srv.(grpcExporter).exportGRPC(ctx, dec)
		},
	}},
	Metadata: "opentelemetry/proto/collector/trace/v1/trace_service.proto",
}

// grpcLogsService is OTLP's LogsService, served like grpcTraceService.
var grpcLogsService = grpc.ServiceDesc{
	ServiceName: "opentelemetry.proto.collector.logs.v1.LogsService",
	HandlerType: (*grpcExporter)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Export",
		Handler: func(srv any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			return srv.(grpcExporter).exportLogsGRPC(ctx, dec)
		},
	}},
	Metadata: "opentelemetry/proto/collector/logs/v1/logs_service.proto",
}

// rawMessage is a protobuf message as bytes: the request before it is
// checked and decoded, the answer already encoded.
type rawMessage []byte

// rawCodec is the codec of NewGRPC's server (grpc.ForceServerCodecV2): it
// copies messages in and out as bytes and decodes nothing, so that no
// request reaches pdata's decoder before otlp.DecodeProto's guard. It is
// named "proto" because that is what OTLP clients send and expect.
type rawCodec struct{}

func (rawCodec) Name() string { return "proto" }

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	m, ok := v.(*rawMessage)
	if !ok {
		return nil, fmt.Errorf("loupe's gRPC codec sends raw messages only, not %T", v)
	}
	return mem.BufferSlice{mem.SliceBuffer(*m)}, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	m, ok := v.(*rawMessage)
	if !ok {
		return fmt.Errorf("loupe's gRPC codec receives raw messages only, not %T", v)
	}
	*m = data.Materialize()
	return nil
}

// exportGRPC is TraceService/Export: the API key first (before the
// message is read), then the message through the guard and pdata, the
// mapping and one commit. Its errors are gRPC statuses as OTLP/gRPC
// specifies them: Unauthenticated and PermissionDenied for keys,
// InvalidArgument for data that will never be accepted (not retried),
// Unavailable for a store failure (retried), ResourceExhausted (from gRPC)
// for a message over the limit.
func (s *Server) exportGRPC(ctx context.Context, dec func(any) error) (*rawMessage, error) {
	return s.exportSignal(ctx, dec, grpcTraceMethod, func(ctx context.Context, t *Server, b []byte) (int64, string, error) {
		return t.ingestTracesBody(ctx, b, false)
	})
}

// exportLogsGRPC is LogsService/Export, as exportGRPC is
// TraceService/Export; the partial success counts log records.
func (s *Server) exportLogsGRPC(ctx context.Context, dec func(any) error) (*rawMessage, error) {
	return s.exportSignal(ctx, dec, grpcLogsMethod, func(ctx context.Context, t *Server, b []byte) (int64, string, error) {
		return t.ingestLogsBody(ctx, b, false)
	})
}

// exportSignal is one OTLP/gRPC export through ingest (see exportGRPC).
func (s *Server) exportSignal(ctx context.Context, dec func(any) error, method string, ingest func(context.Context, *Server, []byte) (int64, string, error)) (resp *rawMessage, err error) {
	defer func() {
		if v := recover(); v != nil {
			s.log.Error("loupe serve: panic", "method", method, "panic", v, "stack", string(debug.Stack()))
			resp, err = nil, status.Error(codes.Internal, "internal error (logged by the server)")
		}
	}()
	var id *identity
	if s.o.RequireKeys {
		k, err := s.authorizeGRPC(ctx)
		if err != nil {
			return nil, err
		}
		id = &identity{key: k}
		ctx = context.WithValue(ctx, identityKey{}, *id)
	}
	project := store.DefaultProject
	if id != nil {
		project = id.key.homeProject()
	}
	md, _ := metadata.FromIncomingContext(ctx)
	if v := md.Get(strings.ToLower(ProjectHeader)); len(v) > 0 && strings.TrimSpace(v[0]) != "" {
		project = strings.TrimSpace(v[0])
	}
	target, ctx, done, err := s.projectFor(ctx, project)
	if err != nil {
		return nil, grpcProjectError(err)
	}
	defer done()
	var b rawMessage
	if err := dec(&b); err != nil {
		return nil, err // already a status (ResourceExhausted, Canceled, …)
	}
	rejected, msg, err := ingest(ctx, target, b)
	if err != nil {
		var de decodeError
		var pe *projectError
		if errors.As(err, &de) {
			return nil, status.Error(codes.InvalidArgument, clip(err.Error(), maxErrorText))
		}
		if errors.As(err, &pe) {
			return nil, grpcProjectError(err)
		}
		return nil, s.grpcStoreError(ctx, method, err)
	}
	out := rawMessage(exportResponse(false, signalTraces, rejected, msg))
	return &out, nil
}

// grpcStoreError turns a failed commit into a status: InvalidArgument for
// a record the store refused (the data is at fault), the context's own
// status when the client went away or the deadline passed, Unavailable
// otherwise, with the details in the log only.
func (s *Server) grpcStoreError(ctx context.Context, method string, err error) error {
	var re *store.RecordError
	var sv *store.SchemaVersionError
	switch {
	case errors.As(err, &re):
		return status.Error(codes.InvalidArgument, clip(err.Error(), maxErrorText))
	case ctx.Err() != nil:
		return status.FromContextError(ctx.Err()).Err()
	case errors.As(err, &sv):
		s.log.Error("loupe serve: store is read-only", "err", err)
		return status.Error(codes.Unavailable, "the store cannot be written by this version of loupe (its schema is newer); the server logged the details")
	}
	s.log.Error("loupe serve: store error", "method", method, "err", err)
	return status.Error(codes.Unavailable, "the store failed; retry later (the server logged the details)")
}

// authorizeGRPC checks the API key in the request's metadata
// ("authorization: Bearer lk_…"): it must be an ingest or admin key.
func (s *Server) authorizeGRPC(ctx context.Context) (Key, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	var token string
	for _, v := range md.Get("authorization") {
		if t, ok := strings.CutPrefix(v, "Bearer "); ok && strings.TrimSpace(t) != "" {
			token = strings.TrimSpace(t)
			break
		}
	}
	if token == "" {
		return Key{}, status.Error(codes.Unauthenticated, "this server requires an API key: send the metadata authorization: Bearer <key> (create one with loupe keys create --scope ingest)")
	}
	k, err := authenticate(ctx, s.keys, token)
	if err != nil {
		if strings.Contains(err.Error(), "API key") {
			return Key{}, status.Error(codes.Unauthenticated, err.Error())
		}
		return Key{}, s.grpcStoreError(ctx, "authorization", err)
	}
	if k.Scope != ScopeIngest && k.Scope != ScopeAdmin {
		return Key{}, status.Error(codes.PermissionDenied, fmt.Sprintf("API key %s has scope %s, which does not allow OTLP export (use an ingest or admin key)", k.ID, k.Scope))
	}
	return k, nil
}

// grpcProjectError is the status of a project the request may not use
// (PermissionDenied) or that does not exist (NotFound).
func grpcProjectError(err error) error {
	var pe *projectError
	if errors.As(err, &pe) {
		if pe.missing {
			return status.Error(codes.NotFound, pe.Error())
		}
		return status.Error(codes.PermissionDenied, pe.Error())
	}
	return status.Error(codes.Unavailable, "the store failed; retry later (the server logged the details)")
}
