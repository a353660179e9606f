package store

import (
	"context"
	"fmt"
	"strings"

	"github.com/loupe-dev/loupe/trace"
)

// MinIDPrefix is the fewest hex digits of a trace id that Resolve takes
// as a prefix.
const MinIDPrefix = 4

// Resolve returns the id of the trace that s names: a full trace id (32
// hex digits, any case, surrounding spaces ignored), or a prefix of at
// least MinIDPrefix hex digits that starts the id of exactly one stored
// trace. A full id is returned as it is, without looking in st.
//
// The errors say what is wrong: an unknown prefix wraps ErrNotFound ("no
// trace id starts with …"); a malformed id ("trace id …: want 4 to 32
// hex digits") or an ambiguous prefix ("trace id prefix … is ambiguous
// (…, …, …); give more digits") is a *QueryError, the caller's to fix;
// any other error is st's.
func Resolve(ctx context.Context, st Store, s string) (trace.TraceID, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	if id, err := trace.ParseTraceID(s); err == nil {
		return id, nil
	}
	if len(s) < MinIDPrefix || len(s) > 32 {
		return trace.TraceID{}, queryErrorf("trace id %q: want %d to 32 hex digits", s, MinIDPrefix)
	}
	if _, _, err := PrefixRange(s); err != nil {
		return trace.TraceID{}, &QueryError{Err: err}
	}
	// Two are enough to know the prefix is ambiguous.
	page, err := st.List(ctx, ListQuery{Filter: Filter{IDPrefix: s}, Limit: 2})
	if err != nil {
		return trace.TraceID{}, err
	}
	switch len(page.Traces) {
	case 0:
		return trace.TraceID{}, fmt.Errorf("no trace id starts with %s: %w", s, ErrNotFound)
	case 1:
		return page.Traces[0].ID, nil
	}
	return trace.TraceID{}, queryErrorf("trace id prefix %s is ambiguous (%s, %s, …); give more digits", s, page.Traces[0].ID, page.Traces[1].ID)
}
