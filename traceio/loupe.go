package traceio

import (
	"bufio"
	"errors"
	"io"
	"iter"

	"github.com/loupe-dev/loupe/trace"
)

// readLoupe reads Loupe JSON lines: each line is decoded and validated by
// trace.DecodeRecord and passed on unchanged, Seq included.
func readLoupe(s *source) error {
	return s.lines(func(b []byte) error {
		rec, err := trace.DecodeRecord(b)
		if err != nil {
			e := &Error{File: s.name, Line: s.line, Err: err}
			var fe *trace.FieldError
			if errors.As(err, &fe) {
				e.Field, e.Err = fe.Field, fe.Err
			}
			return e
		}
		if rec.Seq == 0 {
			return s.errf("seq", "missing or 0; records are numbered from 1 within their trace")
		}
		return s.emit(rec)
	})
}

// WriteJSONL writes recs to w as Loupe JSON lines, one record per line, in
// the encoding trace.DecodeRecord (and Read with FormatLoupe) reads. It
// buffers its writes and stops at the first error, returning it.
func WriteJSONL(w io.Writer, recs iter.Seq[trace.Record]) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	buf := make([]byte, 0, 1024)
	for r := range recs {
		buf = r.AppendJSON(buf[:0])
		buf = append(buf, '\n')
		if _, err := bw.Write(buf); err != nil {
			return err
		}
	}
	return bw.Flush()
}
