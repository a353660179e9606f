package server

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/loupe-dev/loupe/otlp"
	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/trace"
)

// bodyError is a request body the server refuses, with its status.
type bodyError struct {
	code int
	msg  string
}

func (e *bodyError) Error() string { return e.msg }

// readBody reads the request body within the limits: MaxBodyBytes as
// sent, MaxDecodedBytes after gzip (Content-Encoding: gzip). Both are
// checked while reading, so a gzip bomb stops at the limit.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	body := http.MaxBytesReader(w, r.Body, s.o.MaxBodyBytes)
	var rd io.Reader = body
	switch enc := strings.ToLower(strings.TrimSpace(r.Header.Get("Content-Encoding"))); enc {
	case "", "identity":
	case "gzip", "x-gzip":
		zr, err := gzip.NewReader(body)
		if err != nil {
			return nil, s.bodyErr(err, "the body is not gzip: "+err.Error())
		}
		defer zr.Close()
		rd = zr
	default:
		return nil, &bodyError{http.StatusUnsupportedMediaType, fmt.Sprintf("Content-Encoding %q is not supported (send gzip or nothing)", enc)}
	}
	b, err := io.ReadAll(io.LimitReader(rd, s.o.MaxDecodedBytes+1))
	if err != nil {
		return nil, s.bodyErr(err, "reading the body: "+err.Error())
	}
	if int64(len(b)) > s.o.MaxDecodedBytes {
		return nil, &bodyError{http.StatusRequestEntityTooLarge, fmt.Sprintf("the body is larger than %d bytes once decompressed; send smaller batches", s.o.MaxDecodedBytes)}
	}
	return b, nil
}

func (s *Server) bodyErr(err error, msg string) error {
	var mb *http.MaxBytesError
	if errors.As(err, &mb) {
		return &bodyError{http.StatusRequestEntityTooLarge, fmt.Sprintf("the body is larger than %d bytes; send smaller batches", s.o.MaxBodyBytes)}
	}
	return &bodyError{http.StatusBadRequest, msg}
}

// ingestResult is the answer of POST /v1/records.
type ingestResult struct {
	Accepted int `json:"accepted"` // records in the request, all committed
	Added    int `json:"added"`    // of which new (the others were stored already)
}

// postRecords ingests Loupe records: NDJSON (one record a line) or one
// JSON array. Each record is decoded and checked before any is stored;
// the first bad one is answered 400 with its index and field, and nothing
// of the request is stored.
func (s *Server) postRecords(w http.ResponseWriter, r *http.Request) {
	if !checkRecordType(w, r) {
		return
	}
	b, err := s.readBody(w, r)
	if err != nil {
		s.answerBodyError(w, err)
		return
	}
	recs, err := DecodeRecords(b)
	if err != nil {
		var de *DecodeError
		if errors.As(err, &de) {
			i := de.Index
			writeJSON(w, http.StatusBadRequest, errorBody{Error: clip(err.Error(), maxErrorText), Index: &i, Field: de.Field})
			return
		}
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	for i := range recs {
		r := &recs[i]
		store.Sanitize(r)
		r.Input = otlp.LimitValue(r.Input, s.o.MaxValueBytes)
		r.Output = otlp.LimitValue(r.Output, s.o.MaxValueBytes)
		r.Thinking = otlp.LimitValue(r.Thinking, s.o.MaxValueBytes)
		if err := store.ValidateRecord(i, r); err != nil {
			var re *store.RecordError
			errors.As(err, &re)
			writeJSON(w, http.StatusBadRequest, errorBody{Error: clip(fmt.Sprintf("record %d: %v; nothing in this request was stored", i, re.Err), maxErrorText), Index: &i, Field: re.Field})
			return
		}
	}
	added, err := s.commit(r.Context(), recs)
	if err != nil {
		s.storeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, ingestResult{Accepted: len(recs), Added: added})
}

// commit repairs and redacts recs, appends them in one transaction
// (shared with other requests' records when the store can: see
// grouper) and, once they are committed, hands them to the live streams.
func (s *Server) commit(ctx context.Context, recs []trace.Record) (int, error) {
	if len(recs) == 0 {
		return 0, nil
	}
	for i := range recs {
		if s.o.Redact != nil {
			s.o.Redact(&recs[i])
		}
		if s.o.Prices != nil {
			s.o.Prices.PriceRecord(&recs[i])
		}
	}
	var added int
	var err error
	if s.group != nil {
		added, err = s.group.append(ctx, recs)
	} else {
		added, err = s.o.Store.Append(ctx, recs)
	}
	if err != nil {
		return 0, err
	}
	s.hub.publish(recs)
	if s.o.Online != nil {
		s.o.Online.Ended(recs) // queues the traces that ended; never blocks
	}
	return added, nil
}

// DecodeError is a record of a /v1/records body that does not decode.
type DecodeError struct {
	Index int    // the record's position in the body, from 0
	Line  int    // its line, from 1 (NDJSON) or 0
	Field string // the field at fault, "" if the record is not an object
	Err   error
}

// Error says which record is bad, where and why, and that nothing was
// stored.
func (e *DecodeError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "record %d", e.Index)
	if e.Line > 0 {
		fmt.Fprintf(&b, " (line %d)", e.Line)
	}
	b.WriteString(": ")
	b.WriteString(e.Err.Error())
	b.WriteString("; nothing in this request was stored")
	return b.String()
}

// Unwrap returns the decoding error (often a *trace.FieldError).
func (e *DecodeError) Unwrap() error { return e.Err }

// DecodeRecords decodes a /v1/records body: one JSON array of records, or
// records one a line (NDJSON; blank lines are skipped). It checks every
// record with trace.DecodeRecord and stops at the first bad one with a
// *DecodeError. It never panics.
func DecodeRecords(b []byte) ([]trace.Record, error) {
	b = bytes.TrimPrefix(b, []byte("\xef\xbb\xbf"))
	trimmed := bytes.TrimLeft(b, " \t\r\n")
	if len(trimmed) == 0 {
		return nil, errors.New("the body is empty; send records as NDJSON or a JSON array")
	}
	var recs []trace.Record
	if trimmed[0] == '[' {
		dec := json.NewDecoder(bytes.NewReader(trimmed))
		if _, err := dec.Token(); err != nil {
			return nil, fmt.Errorf("not a JSON array: %v", err)
		}
		for i := 0; dec.More(); i++ {
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil {
				return nil, &DecodeError{Index: i, Err: fmt.Errorf("not valid JSON: %v", err)}
			}
			rec, err := trace.DecodeRecord(raw)
			if err != nil {
				return nil, decodeErr(i, 0, err)
			}
			recs = append(recs, rec)
		}
		if _, err := dec.Token(); err != nil {
			return nil, fmt.Errorf("the JSON array is not closed: %v", err)
		}
		if dec.More() {
			return nil, errors.New("data after the JSON array")
		}
		return recs, nil
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, len(b)+1)
	line := 0
	for sc.Scan() {
		line++
		l := bytes.TrimSpace(sc.Bytes())
		if len(l) == 0 {
			continue
		}
		rec, err := trace.DecodeRecord(l)
		if err != nil {
			return nil, decodeErr(len(recs), line, err)
		}
		recs = append(recs, rec)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return recs, nil
}

func decodeErr(i, line int, err error) error {
	de := &DecodeError{Index: i, Line: line, Err: err}
	var fe *trace.FieldError
	if errors.As(err, &fe) {
		de.Field = fe.Field
	}
	return de
}

func (s *Server) answerBodyError(w http.ResponseWriter, err error) {
	var be *bodyError
	if errors.As(err, &be) {
		writeError(w, be.code, be.msg)
		return
	}
	writeError(w, http.StatusBadRequest, err.Error())
}

// --- OTLP/HTTP -------------------------------------------------------------

// postOTLP implements OTLP/HTTP's trace export: protobuf
// (application/x-protobuf) or JSON (application/json), optionally gzip.
// The answer is an ExportTraceServiceResponse in the request's encoding;
// spans that cannot be mapped are counted in its partial_success and the
// others are stored. Errors follow OTLP/HTTP: 400 with a google.rpc.Status
// for bad data (not retryable), 503 with Retry-After when the store fails
// (retryable), 413 and 415 for bodies the server will not read.
func (s *Server) postOTLP(w http.ResponseWriter, r *http.Request) {
	s.serveOTLP(w, r, signalTraces, s.ingestTracesBody)
}

// postOTLPLogs implements OTLP/HTTP's logs export (POST /v1/logs) as
// postOTLP does traces: the same encodings, limits, errors and partial
// success (counting log records), with an ExportLogsServiceResponse.
func (s *Server) postOTLPLogs(w http.ResponseWriter, r *http.Request) {
	s.serveOTLP(w, r, signalLogs, s.ingestLogsBody)
}

// otlpSignal is what differs between OTLP's trace and logs exports in
// their answers: the partial success's JSON name of the rejected count.
type otlpSignal struct {
	rejectedJSON string // "rejectedSpans" or "rejectedLogRecords"
}

var (
	signalTraces = otlpSignal{rejectedJSON: "rejectedSpans"}
	signalLogs   = otlpSignal{rejectedJSON: "rejectedLogRecords"}
)

// decodeError is a request body that is not the OTLP the server accepts.
type decodeError struct{ error }

// serveOTLP is an OTLP/HTTP export: the content type, the body within the
// limits, then ingest (which decodes, maps and commits), then the answer.
func (s *Server) serveOTLP(w http.ResponseWriter, r *http.Request, sig otlpSignal, ingest func(ctx context.Context, b []byte, isJSON bool) (int64, string, error)) {
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	var isJSON bool
	switch ct {
	case "application/x-protobuf", "application/protobuf":
	case "application/json":
		isJSON = true
	default:
		writeStatus(w, false, http.StatusUnsupportedMediaType, fmt.Sprintf("Content-Type %q is not OTLP: send application/x-protobuf or application/json", clip(r.Header.Get("Content-Type"), 100)))
		return
	}
	b, err := s.readBody(w, r)
	if err != nil {
		var be *bodyError
		code := http.StatusBadRequest
		if errors.As(err, &be) {
			code = be.code
		}
		writeStatus(w, isJSON, code, err.Error())
		return
	}
	rejected, msg, err := ingest(r.Context(), b, isJSON)
	if err != nil {
		var de decodeError
		var re *store.RecordError
		if errors.As(err, &de) || errors.As(err, &re) { // the data is at fault
			writeStatus(w, isJSON, http.StatusBadRequest, err.Error())
			return
		}
		var pe *projectError
		if errors.As(err, &pe) {
			code := http.StatusForbidden
			if pe.missing {
				code = http.StatusNotFound
			}
			writeStatus(w, isJSON, code, pe.Error())
			return
		}
		if r.Context().Err() == nil {
			s.log.Error("loupe serve: store error", "path", r.URL.Path, "err", err)
		}
		w.Header().Set("Retry-After", "1")
		writeStatus(w, isJSON, http.StatusServiceUnavailable, "the store failed; retry later (the server logged the details)")
		return
	}
	if isJSON {
		w.Header().Set("Content-Type", "application/json")
	} else {
		w.Header().Set("Content-Type", "application/x-protobuf")
	}
	w.WriteHeader(http.StatusOK)
	w.Write(exportResponse(isJSON, sig, rejected, msg))
}

// ingestTracesBody decodes an OTLP trace export and ingests it.
func (s *Server) ingestTracesBody(ctx context.Context, b []byte, isJSON bool) (int64, string, error) {
	var td ptrace.Traces
	var err error
	if isJSON {
		td, err = otlp.DecodeJSON(b)
	} else {
		td, err = otlp.DecodeProto(b)
	}
	if err != nil {
		return 0, "", decodeError{err}
	}
	return s.ingestOTLP(ctx, td)
}

// ingestLogsBody decodes an OTLP logs export and ingests it.
func (s *Server) ingestLogsBody(ctx context.Context, b []byte, isJSON bool) (int64, string, error) {
	var ld plog.Logs
	var err error
	if isJSON {
		ld, err = otlp.DecodeLogsJSON(b)
	} else {
		ld, err = otlp.DecodeLogsProto(b)
	}
	if err != nil {
		return 0, "", decodeError{err}
	}
	return s.ingestLogs(ctx, ld)
}

// ingestOTLP maps decoded OTLP spans to records, repairs their text
// (OTLP strings arrive unchecked), commits them and returns the partial
// success to answer: how many spans were rejected and why. OTLP/HTTP and
// OTLP/gRPC both ingest through it.
func (s *Server) ingestOTLP(ctx context.Context, td ptrace.Traces) (rejected int64, msg string, err error) {
	rss := td.ResourceSpans()
	if parts := splitByProject(rss.Len(), func(i int) pcommon.Map { return rss.At(i).Resource().Attributes() }, s.name); parts != nil {
		return s.ingestParts(ctx, parts, func(t *Server, idx []int) (int64, string, error) {
			part := ptrace.NewTraces()
			for _, i := range idx {
				rss.At(i).CopyTo(part.ResourceSpans().AppendEmpty())
			}
			return t.ingestOTLP(ctx, part)
		})
	}
	res := otlp.Map(td, &s.o.OTLP)
	errs := make([]error, len(res.Rejected))
	for i, e := range res.Rejected {
		errs[i] = e
	}
	return s.commitMapped(ctx, res.Records, errs)
}

// ingestLogs is ingestOTLP for decoded OTLP log records (otlp.MapLogs):
// the partial success counts the log records rejected.
func (s *Server) ingestLogs(ctx context.Context, ld plog.Logs) (rejected int64, msg string, err error) {
	rls := ld.ResourceLogs()
	if parts := splitByProject(rls.Len(), func(i int) pcommon.Map { return rls.At(i).Resource().Attributes() }, s.name); parts != nil {
		return s.ingestParts(ctx, parts, func(t *Server, idx []int) (int64, string, error) {
			part := plog.NewLogs()
			for _, i := range idx {
				rls.At(i).CopyTo(part.ResourceLogs().AppendEmpty())
			}
			return t.ingestLogs(ctx, part)
		})
	}
	res := otlp.MapLogs(ld, &s.o.OTLP)
	errs := make([]error, len(res.Rejected))
	for i, e := range res.Rejected {
		errs[i] = e
	}
	return s.commitMapped(ctx, res.Records, errs)
}

// splitByProject groups the n resources of a request by the project
// each names in its attributes (ProjectAttribute; none is here's): nil
// when every one is here's.
func splitByProject(n int, attrs func(i int) pcommon.Map, here string) map[string][]int {
	var parts map[string][]int
	for i := range n {
		p := here
		if v, ok := attrs(i).Get(ProjectAttribute); ok && strings.TrimSpace(v.AsString()) != "" {
			p = strings.TrimSpace(v.AsString())
		}
		if p != here && parts == nil {
			parts = map[string][]int{}
			for j := range i {
				parts[here] = append(parts[here], j)
			}
		}
		if parts != nil {
			parts[p] = append(parts[p], i)
		}
	}
	return parts
}

// ingestParts ingests the resources of a request that name other
// projects than the request's: each project's part into that project, in
// name order, once the request is found to be allowed every one of them
// (so that a refusal stores nothing). A failure fails the request; the
// parts committed before it stay, and a sender's retry stores them
// again harmlessly (records are unique by trace and seq).
func (s *Server) ingestParts(ctx context.Context, parts map[string][]int, ingest func(t *Server, idx []int) (int64, string, error)) (rejected int64, msg string, err error) {
	names := slices.Sorted(maps.Keys(parts))
	targets := make([]*Server, len(names))
	for i, n := range names {
		// In use until the request ends; a deletion waits for it.
		var done func()
		if targets[i], _, done, err = s.projectFor(ctx, n); err != nil {
			return 0, "", err
		}
		defer done()
	}
	for i, n := range names {
		r, m, err := ingest(targets[i], parts[n])
		if err != nil {
			return 0, "", err
		}
		if rejected += r; msg == "" {
			msg = m
		}
	}
	return rejected, msg, nil
}

// commitMapped repairs and commits mapped records and returns the partial
// success for the items rejected: their count, and the first reason.
func (s *Server) commitMapped(ctx context.Context, recs []trace.Record, rejectedErrs []error) (rejected int64, msg string, err error) {
	for i := range recs {
		store.Sanitize(&recs[i])
	}
	if _, err := s.commit(ctx, recs); err != nil {
		return 0, "", err
	}
	if n := len(rejectedErrs); n > 0 {
		rejected, msg = int64(n), clip(rejectedErrs[0].Error(), 200)
		if n > 1 {
			msg += fmt.Sprintf(" (and %d more)", n-1)
		}
	}
	return rejected, msg, nil
}

// exportResponse encodes an ExportTraceServiceResponse (or an
// ExportLogsServiceResponse, encoded alike), whose only field is
// partial_success {rejected_spans (or rejected_log_records) = 1;
// error_message = 2}, empty when everything was accepted. It is written by
// hand rather than with pdata's ptraceotlp, which would link gRPC into
// loupe for two fields.
func exportResponse(isJSON bool, sig otlpSignal, rejected int64, msg string) []byte {
	if isJSON {
		if rejected == 0 {
			return []byte("{}\n")
		}
		b, _ := json.Marshal(map[string]any{"partialSuccess": map[string]any{sig.rejectedJSON: strconv.FormatInt(rejected, 10), "errorMessage": msg}})
		return append(b, '\n')
	}
	if rejected == 0 {
		return nil
	}
	var ps []byte
	ps = append(ps, 0x08)
	ps = appendVarint(ps, uint64(rejected))
	ps = append(ps, 0x12)
	ps = appendVarint(ps, uint64(len(msg)))
	ps = append(ps, msg...)
	b := []byte{0x0a}
	b = appendVarint(b, uint64(len(ps)))
	return append(b, ps...)
}

// writeStatus writes an OTLP/HTTP error: a google.rpc.Status with the
// gRPC code matching the HTTP status, in JSON or protobuf.
func writeStatus(w http.ResponseWriter, isJSON bool, httpCode int, msg string) {
	msg = clip(msg, maxErrorText)
	code := 3 // INVALID_ARGUMENT
	switch httpCode {
	case http.StatusServiceUnavailable:
		code = 14 // UNAVAILABLE
	case http.StatusRequestEntityTooLarge:
		code = 8 // RESOURCE_EXHAUSTED
	case http.StatusUnauthorized:
		code = 16 // UNAUTHENTICATED
	case http.StatusForbidden:
		code = 7 // PERMISSION_DENIED
	case http.StatusInternalServerError:
		code = 13 // INTERNAL
	}
	if isJSON {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(httpCode)
		json.NewEncoder(w).Encode(struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		}{code, msg})
		return
	}
	// google.rpc.Status: field 1 code (varint), field 2 message (bytes).
	b := []byte{0x08}
	b = appendVarint(b, uint64(code))
	b = append(b, 0x12)
	b = appendVarint(b, uint64(len(msg)))
	b = append(b, msg...)
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(httpCode)
	w.Write(b)
}

func appendVarint(b []byte, v uint64) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}
