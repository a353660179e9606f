package traceio

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"

	"github.com/loupe-dev/loupe/otlp"
)

// readOTLP reads OTLP/JSON: one {"resourceSpans": …} document, or several
// one after another (the OTel Collector's file exporter writes one per
// line). Each document is mapped by package otlp, which documents the
// mapping; its records keep the seqs otlp derives from each span, so a
// file imported twice, or a trace both imported and received by `loupe
// serve`, is stored once. A rejected span (zero ids, no start time) stops
// the import with the span's path as the field.
func readOTLP(s *source) error {
	data, err := io.ReadAll(io.LimitReader(s.r, maxDocument+1))
	if err != nil {
		return &Error{File: s.name, Err: err}
	}
	if len(data) > maxDocument {
		return &Error{File: s.name, Err: errors.New("larger than 256 MiB; split it")}
	}
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	dec := json.NewDecoder(bytes.NewReader(data))
	for {
		start := dec.InputOffset()
		var doc json.RawMessage
		if err := dec.Decode(&doc); err == io.EOF {
			return nil
		} else if err != nil {
			return jsonError(s.name, data, 0, err)
		}
		line := lineAt(data, start+int64(len(data[start:])-len(bytes.TrimLeft(data[start:], " \t\r\n"))))
		td, err := otlp.DecodeJSON(doc)
		if err != nil {
			return &Error{File: s.name, Line: line, Err: err}
		}
		res := otlp.Map(td, nil)
		if len(res.Rejected) > 0 {
			e := res.Rejected[0]
			return &Error{File: s.name, Line: line, Field: spanPath(e), Err: e.Err}
		}
		for _, r := range res.Records {
			if err := s.emit(r); err != nil {
				return err
			}
		}
	}
}

func spanPath(e *otlp.SpanError) string {
	return "resourceSpans[" + strconv.Itoa(e.Resource) + "].scopeSpans[" + strconv.Itoa(e.Scope) + "].spans[" + strconv.Itoa(e.Span) + "]"
}
