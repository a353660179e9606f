package mcpserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/loupe-dev/loupe/agent"
	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/trace"
)

// syncBuffer is a bytes.Buffer safe for concurrent use, for a server's
// log.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// huge returns n bytes of the two-byte pattern p repeated.
func huge(p string, n int) string { return strings.Repeat(p, n/2) }

// echoes reports whether text holds more than n bytes in a row of in, a
// pattern of two bytes repeated (see huge).
func echoes(text, in string, n int) bool {
	return strings.Contains(text, in[:n+1]) || strings.Contains(text, in[1:n+2])
}

// answer calls a tool and returns its answer's text: the error's, or the
// result's JSON.
func answer(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) (text string, isError bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: protocol error: %.300v", name, err)
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String(), res.IsError
}

// TestHugeInputsAreBounded calls every tool with a megabyte where an id,
// a query, a path or a name goes: whether the SDK's schema check, Loupe's
// own checks or another package refuses it, the error is a few KiB at
// most, says what was wrong, and repeats no more than maxEcho bytes of the
// input, with a marker where it was cut.
func TestHugeInputsAreBounded(t *testing.T) {
	const mb = 1 << 20
	hex, text := huge("ab", mb), huge("xy", mb)
	root := t.TempDir()
	writeEval(t, root)
	plain := connectMemory(t, newServer(t, Options{EvalRoot: root}))
	// A pipeline whose error repeats the parameter it was given, as is.
	pipe := connectMemory(t, newServer(t, Options{
		Config: &Config{Pipeline: "rag.yaml"},
		RunPipeline: func(_ context.Context, _ *trace.Tracer, _ string, params map[string]string) (agent.Result, error) {
			return agent.Result{}, fmt.Errorf("param top_k=%s is not a number", params["top_k"])
		},
	}))
	for _, tt := range []struct {
		name string
		cs   *mcp.ClientSession
		tool string
		args map[string]any
		in   string // the huge input in args
		want string // in the error
	}{
		{"pipeline param", pipe, "run_agent_with_trace", map[string]any{"query": "q", "params": map[string]any{"top_k": text}}, text, "top_k"},
		{"run thread_id", plain, "run_agent_with_trace", map[string]any{"query": "q", "thread_id": text}, text, "thread_id"},
		{"run params", plain, "run_agent_with_trace", map[string]any{"query": "q", "params": map[string]any{text: text}}, text, "params"},
		{"get trace_id hex", plain, "get_execution_trace", map[string]any{"trace_id": hex}, hex, "trace_id"},
		{"get trace_id", plain, "get_execution_trace", map[string]any{"trace_id": text}, text, "trace_id"},
		{"list argument name", plain, "list_traces", map[string]any{text: 1}, text, "additional properties"},
		{"search query", plain, "search_traces", map[string]any{"query": text}, text, "query"},
		{"search query filter", plain, "search_traces", map[string]any{"query": "colour:" + text[:1990]}, text, "keys"},
		{"search step_type", plain, "search_traces", map[string]any{"step_type": text}, text, "step_type"},
		{"delete trace_id", plain, "delete_trace", map[string]any{"trace_id": text}, text, "trace_id"},
		{"delete trace_id hex", plain, "delete_trace", map[string]any{"trace_id": hex}, hex, "trace_id"},
		{"eval file", plain, "run_eval", map[string]any{"file": text}, text, "eval file"},
		{"eval file outside", plain, "run_eval", map[string]any{"file": "../" + text}, text, "outside"},
		{"eval name", plain, "run_eval", map[string]any{"file": "demo.eval.yaml", "name": text}, text, "no stored trace"},
		{"eval tags", plain, "run_eval", map[string]any{"file": "demo.eval.yaml", "tags": []string{"a", text}}, text, "no stored trace"},
		{"eval since", plain, "run_eval", map[string]any{"file": "demo.eval.yaml", "since": text}, text, "since"},
		{"eval target", plain, "run_eval", map[string]any{"file": "demo.eval.yaml", "target": text}, text, "target"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			msg, isError := answer(t, tt.cs, tt.tool, tt.args)
			if !isError {
				t.Fatalf("succeeded with %.500s", msg)
			}
			if len(msg) >= 4<<10 {
				t.Errorf("error of %d bytes: %.300s…", len(msg), msg)
			}
			if echoes(msg, tt.in, maxEcho) {
				t.Errorf("the error repeats more than %d bytes of the input: %.600s", maxEcho, msg)
			}
			if echoes(msg, tt.in, 16) && !strings.Contains(msg, "…[truncated") {
				t.Errorf("the error repeats the input cut without a marker: %.600s", msg)
			}
			if !strings.Contains(msg, tt.want) {
				t.Errorf("the error does not say %q: %.600s", tt.want, msg)
			}
		})
	}

	// A run's result is bounded too, however long its query.
	t.Run("run query", func(t *testing.T) {
		out, isError := answer(t, plain, "run_agent_with_trace", map[string]any{"query": text})
		if isError {
			t.Fatalf("error: %.600s", out)
		}
		if len(out) > DefaultMaxResultBytes || echoes(out, text, DefaultMaxValueBytes) {
			t.Errorf("result of %d bytes repeats the query beyond the value bound", len(out))
		}
	})

	// An unknown tool is a protocol error, bounded the same way.
	t.Run("unknown tool", func(t *testing.T) {
		_, err := plain.CallTool(context.Background(), &mcp.CallToolParams{Name: text, Arguments: map[string]any{}})
		if err == nil {
			t.Fatal("no error")
		}
		if msg := err.Error(); len(msg) >= 4<<10 || echoes(msg, text, maxEcho) || !strings.Contains(msg, "unknown tool") {
			t.Errorf("error of %d bytes: %.600s", len(msg), msg)
		}
	})
}

// Secrets of a store that fails: its file, its DSN, its SQL.
const (
	secretPath = "/secret/path/loupe.db"
	secretDSN  = "postgres://user:pw@host/db"
	secretSQL  = "SELECT trace_id FROM traces"
)

// failStore is a store whose every method fails with err.
type failStore struct{ err error }

func (f failStore) Append(context.Context, []trace.Record) (int, error) { return 0, f.err }
func (f failStore) Trace(context.Context, trace.TraceID) (*store.Trace, error) {
	return nil, f.err
}
func (f failStore) List(context.Context, store.ListQuery) (store.ListPage, error) {
	return store.ListPage{}, f.err
}
func (f failStore) Search(context.Context, store.Query) (store.SearchPage, error) {
	return store.SearchPage{}, f.err
}
func (f failStore) Export(context.Context, store.Filter) iter.Seq2[trace.Record, error] {
	return func(yield func(trace.Record, error) bool) { yield(trace.Record{}, f.err) }
}
func (f failStore) Delete(context.Context, ...trace.TraceID) (int, error) { return 0, f.err }
func (f failStore) Prune(context.Context, store.PrunePolicy) (store.PruneResult, error) {
	return store.PruneResult{}, f.err
}
func (f failStore) Aggregate(context.Context, time.Time, time.Time) (store.Aggregates, error) {
	return store.Aggregates{}, f.err
}
func (f failStore) Close() error { return nil }

// TestStoreFailuresAreHidden makes the store fail every way it can, with
// errors that name its file and DSN and hold SQL, and calls every tool
// that reads or writes it: no answer holds any of them. A failing store
// is reported as such and its error logged; a missing trace, a refused
// query and a refused record are told in their own words.
func TestStoreFailuresAreHidden(t *testing.T) {
	where := fmt.Sprintf("%s (%s): %s", secretPath, secretDSN, secretSQL)
	id := strings.Repeat("ab", 16)
	calls := []struct {
		name     string
		tool     string
		args     map[string]any
		notFound bool // a store.ErrNotFound is a missing trace
	}{
		{name: "run", tool: "run_agent_with_trace", args: map[string]any{"query": "What is 17% of 2340?"}},
		{name: "get", tool: "get_execution_trace", args: map[string]any{"trace_id": id}, notFound: true},
		{name: "get prefix", tool: "get_execution_trace", args: map[string]any{"trace_id": id[:8]}, notFound: true},
		{name: "list", tool: "list_traces", args: map[string]any{}},
		{name: "search text", tool: "search_traces", args: map[string]any{"query": "calculator"}},
		{name: "search filters", tool: "search_traces", args: map[string]any{"query": "status:error"}},
		{name: "delete", tool: "delete_trace", args: map[string]any{"trace_id": id}},
		{name: "eval store", tool: "run_eval", args: map[string]any{"file": "demo.eval.yaml"}},
		{name: "eval agent", tool: "run_eval", args: map[string]any{"file": "demo.eval.yaml", "target": "agent"}},
	}
	for _, kind := range []struct {
		name   string
		err    error
		want   string // in every answer, but for a missing trace's
		logged bool   // the error is logged
	}{
		{"failure", errors.New("sqlite store " + where + ": disk I/O error"), "the trace store failed; the server logged the details", true},
		{"not found", fmt.Errorf("trace %s: %w in %s", id, store.ErrNotFound, where), "the trace store failed", true},
		{"query", fmt.Errorf("list traces in %s: %w", where, &store.QueryError{Err: errors.New("filter: 65 tags are more than the limit of 64")}), "65 tags", false},
		{"record", fmt.Errorf("append to %s: %w", where, &store.RecordError{Index: 3, Type: "bogus", Err: errors.New("unknown record type")}), "record 3 of batch", false},
	} {
		t.Run(kind.name, func(t *testing.T) {
			root := t.TempDir()
			writeEval(t, root)
			var log syncBuffer
			s := newServer(t, Options{Store: failStore{kind.err}, EvalRoot: root, Logger: slog.New(slog.NewTextHandler(&log, nil))})
			cs := connectMemory(t, s)
			for _, c := range calls {
				text, isError := answer(t, cs, c.tool, c.args)
				for _, secret := range []string{secretPath, secretDSN, secretSQL, "loupe.db", "user:pw"} {
					if strings.Contains(text, secret) {
						t.Errorf("%s: the answer reveals %q: %.600s", c.name, secret, text)
					}
				}
				want := kind.want
				if c.notFound && errors.Is(kind.err, store.ErrNotFound) {
					want = "no trace " + c.args["trace_id"].(string)
				}
				if !strings.Contains(text, want) {
					t.Errorf("%s: the answer does not say %q: %.600s", c.name, want, text)
				}
				// Runs succeed, and say in the result that their trace
				// was not stored.
				if ran := c.tool == "run_agent_with_trace" || c.args["target"] == "agent"; ran == isError {
					t.Errorf("%s: is error %v: %.600s", c.name, isError, text)
				}
			}
			if l := log.String(); kind.logged != strings.Contains(l, secretPath) {
				t.Errorf("logged %v, want %v: %.2000s", !kind.logged, kind.logged, l)
			}
		})
	}
}

// TestBoundText checks the bounds of error messages: long quoted values
// are clipped where they stand, the rest is cut at a character boundary,
// every cut is marked, and bounding twice changes nothing.
func TestBoundText(t *testing.T) {
	long := huge("xy", 1<<20)
	for _, tt := range []struct {
		name, msg string
		want      []string // in the bounded message
		max       int
	}{
		{"short", `trace_id "abc": no such trace`, []string{`trace_id "abc": no such trace`}, 100},
		{"quoted", `maxLength: "` + long + `" contains 1048576 Unicode code points, more than 32`,
			[]string{`maxLength: "xyxy`, "…[truncated: 200 of 1048576 bytes shown]", `" contains 1048576 Unicode code points, more than 32`}, 400},
		{"quoted escapes", fmt.Sprintf("file %q: not found", strings.Repeat("\x00\"", 1<<18)), []string{"file ", "…[truncated", `: not found`}, 1200},
		{"raw", "enum: " + long + " does not equal any of", []string{"enum: xyxy", "…[truncated: 2000 of"}, maxErrorBytes + markerRoom},
		{"unmatched quotes", strings.Repeat(`"\"`, 1<<19), []string{"…[truncated"}, maxErrorBytes + markerRoom},
		{"multibyte", "name " + strings.Repeat("é", 1<<16), []string{"…[truncated"}, maxErrorBytes + markerRoom},
		{"many quoted", strings.Repeat(`"`+long[:300]+`" `, 100), []string{"…[truncated: 200 of 300 bytes shown]"}, maxErrorBytes + markerRoom},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := boundText(tt.msg)
			if len(got) > tt.max || !utf8.ValidString(got) {
				t.Errorf("%d bytes (max %d), valid UTF-8 %v: %.500q", len(got), tt.max, utf8.ValidString(got), got)
			}
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("%.500q does not hold %q", got, w)
				}
			}
			if again := boundText(got); again != got {
				t.Errorf("bounding again changed %.300q to %.300q", got, again)
			}
		})
	}

	msg := "no stored trace matches the selection (name=" + long + " tag=" + long[:500] + ")"
	got := clipAll(msg, long, long[:500], "short")
	if len(got) > 1000 || !strings.Contains(got, "(name=xyxy") || !strings.Contains(got, "…[truncated: 200 of 500 bytes shown])") {
		t.Errorf("clipAll: %d bytes: %.1000q", len(got), got)
	}
}
