package tracelog_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loupe-dev/loupe/agent"
	"github.com/loupe-dev/loupe/llm/scripted"
	"github.com/loupe-dev/loupe/tool"
	"github.com/loupe-dev/loupe/trace"
	"github.com/loupe-dev/loupe/trace/tracelog"
	"github.com/loupe-dev/loupe/tracetest"
)

// logs returns the log records of recs.
func logs(recs []trace.Record) []trace.Record {
	var out []trace.Record
	for _, r := range recs {
		if r.Type == trace.TypeLog {
			out = append(out, r)
		}
	}
	return out
}

// attrsOf returns the attributes of a log record, decoded.
func attrsOf(t *testing.T, r trace.Record) map[string]any {
	t.Helper()
	e, _ := r.Entry()
	if len(e.Attributes) == 0 {
		return nil
	}
	var m map[string]any
	if err := json.Unmarshal(e.Attributes, &m); err != nil {
		t.Fatalf("attributes %s: %v", e.Attributes, err)
	}
	return m
}

// TestAgentToolLogs: a tool that logs with slog.InfoContext during an
// agent run puts its log records in the run's trace, under the tool call,
// and the JSON handler it wraps writes every line as before.
func TestAgentToolLogs(t *testing.T) {
	var out bytes.Buffer
	logger := slog.New(tracelog.New(slog.NewJSONHandler(&out, &slog.HandlerOptions{Level: slog.LevelDebug}), &tracelog.Options{Name: "weather"}))
	type in struct {
		City string `json:"city"`
	}
	forecast := tool.Func("forecast", "The forecast for a city.", func(ctx context.Context, x in) (string, error) {
		logger.DebugContext(ctx, "cache lookup", "city", x.City) // below the trace level: JSON only
		logger.With("component", "client").WithGroup("req").InfoContext(ctx, "fetching forecast", "city", x.City, "attempt", 1)
		logger.WarnContext(ctx, "slow upstream", slog.Duration("took", 1500*time.Millisecond))
		return "sunny", nil
	})
	script, err := scripted.Parse([]byte(`
turns:
  - tool_calls: [{name: forecast, input: {city: Lyon}}]
  - answer: It is sunny in Lyon.
`), "weather.yaml")
	if err != nil {
		t.Fatal(err)
	}
	exec := &agent.Executor{Tracer: trace.New(trace.Options{})}
	res := exec.Run(context.Background(), &agent.ReAct{Model: script.NewModel(), Tools: agent.NewToolbox(forecast)}, "Weather in Lyon?")
	logger.Info("after the run") // no run in the context: JSON only

	tracetest.New(t, res.Records).CalledExactly("forecast").NoErrors().OutputContains("sunny")

	var toolSpan trace.SpanID
	for _, r := range res.Records {
		if r.Type == trace.TypeToolStart {
			toolSpan = r.SpanID
		}
	}
	ls := logs(res.Records)
	if len(ls) != 2 {
		t.Fatalf("log records %v, want 2 (info and warn)", ls)
	}
	for _, r := range ls {
		if r.ParentID != toolSpan || r.Name != "weather" || r.Iteration != 1 {
			t.Errorf("log %s: want it under the tool call %s, named weather, in iteration 1", r.AppendJSON(nil), toolSpan)
		}
	}
	e0, _ := ls[0].Entry()
	if e0.Body.Text() != "fetching forecast" || e0.Severity != "INFO" || e0.SeverityNumber != trace.SeverityInfo {
		t.Errorf("first log = %+v", e0)
	}
	if got, _ := json.Marshal(attrsOf(t, ls[0])); string(got) != `{"component":"client","req":{"attempt":1,"city":"Lyon"}}` {
		t.Errorf("first log's attributes = %s", got)
	}
	e1, _ := ls[1].Entry()
	if e1.Severity != "WARN" || e1.SeverityNumber != trace.SeverityWarn || string(e1.Attributes) != `{"took":"1.5s"}` {
		t.Errorf("second log = %+v (attributes %s)", e1, e1.Attributes)
	}
	// The JSON handler saw all four lines.
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 4 || !strings.Contains(lines[0], `"msg":"cache lookup"`) || !strings.Contains(lines[1], `"component":"client","req":{"city":"Lyon","attempt":1}`) ||
		!strings.Contains(lines[3], `"msg":"after the run"`) {
		t.Errorf("JSON handler output:\n%s", out.String())
	}
}

// TestAttributes: attributes and groups come out as slog's JSON handler
// nests them, slog's rules for empty attributes and groups included.
func TestAttributes(t *testing.T) {
	type point struct{ X, Y int }
	for _, c := range []struct {
		name string
		log  func(ctx context.Context, l *slog.Logger)
		want string // the attributes' JSON; "" for none
	}{
		{"none", func(ctx context.Context, l *slog.Logger) { l.InfoContext(ctx, "m") }, ""},
		{"kinds", func(ctx context.Context, l *slog.Logger) {
			l.InfoContext(ctx, "m", "s", "x", "i", -3, "u", uint64(7), "f", 1.5, "b", true, "nan", math.NaN(),
				"t", time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC), "err", errors.New("bad"), "p", point{1, 2}, "nil", nil)
		}, `{"s":"x","i":-3,"u":7,"f":1.5,"b":true,"nan":"NaN","t":"2026-01-02T03:04:05.000000006Z","err":"bad","p":{"X":1,"Y":2},"nil":null}`},
		{"group attr", func(ctx context.Context, l *slog.Logger) {
			l.InfoContext(ctx, "m", slog.Group("g", "a", 1, slog.Group("h", "b", 2)))
		}, `{"g":{"a":1,"h":{"b":2}}}`},
		{"empty group left out", func(ctx context.Context, l *slog.Logger) { l.InfoContext(ctx, "m", slog.Group("g"), "a", 1) }, `{"a":1}`},
		{"inline group", func(ctx context.Context, l *slog.Logger) { l.InfoContext(ctx, "m", slog.Group("", "a", 1)) }, `{"a":1}`},
		{"empty attr left out", func(ctx context.Context, l *slog.Logger) { l.InfoContext(ctx, "m", slog.Attr{}, "a", 1) }, `{"a":1}`},
		{"WithGroup without attributes", func(ctx context.Context, l *slog.Logger) { l.WithGroup("g").InfoContext(ctx, "m") }, ""},
		{"WithAttrs then WithGroup", func(ctx context.Context, l *slog.Logger) {
			l.With("a", 1).WithGroup("g").With("b", 2).WithGroup("h").InfoContext(ctx, "m", "c", 3)
		}, `{"a":1,"g":{"b":2,"h":{"c":3}}}`},
		{"LogValuer", func(ctx context.Context, l *slog.Logger) { l.InfoContext(ctx, "m", "secret", redacted{}) }, `{"secret":"[redacted]"}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, ec := trace.New(trace.Options{}).Start(context.Background(), "main", trace.RunOptions{})
			c.log(ctx, slog.New(tracelog.New(nil, nil)))
			ls := logs(ec.Records())
			if len(ls) != 1 {
				t.Fatalf("%d log records, want 1", len(ls))
			}
			e, _ := ls[0].Entry()
			if string(e.Attributes) != c.want {
				t.Errorf("attributes = %s\n          want %s", e.Attributes, c.want)
			}
		})
	}
}

type redacted struct{}

func (redacted) LogValue() slog.Value { return slog.StringValue("[redacted]") }

// TestLevels: Options.Level filters what goes into traces, not what the
// wrapped handler gets; error-level records carry their message as the
// error; Enabled is true when either side wants the record.
func TestLevels(t *testing.T) {
	var out bytes.Buffer
	h := tracelog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelError}), &tracelog.Options{Level: slog.LevelWarn})
	ctx, ec := trace.New(trace.Options{}).Start(context.Background(), "main", trace.RunOptions{})
	if h.Enabled(ctx, slog.LevelInfo) || !h.Enabled(ctx, slog.LevelWarn) || h.Enabled(context.Background(), slog.LevelWarn) || !h.Enabled(context.Background(), slog.LevelError) {
		t.Error("Enabled does not say whether the trace or the wrapped handler wants a record")
	}
	l := slog.New(h)
	l.InfoContext(ctx, "info")
	l.WarnContext(ctx, "warn")
	l.ErrorContext(ctx, "failed to connect", "host", "db")
	l.Log(ctx, slog.LevelError+2, "worse")
	ls := logs(ec.Records())
	if len(ls) != 3 {
		t.Fatalf("%d log records, want 3", len(ls))
	}
	for i, want := range []struct{ status, err string }{{"WARN", ""}, {"ERROR", "failed to connect"}, {"ERROR+2", "worse"}} {
		if ls[i].Status != want.status || ls[i].Error != want.err {
			t.Errorf("log %d: status %q error %q, want %q %q", i, ls[i].Status, ls[i].Error, want.status, want.err)
		}
	}
	if e, _ := ls[2].Entry(); e.SeverityNumber != 19 {
		t.Errorf("ERROR+2 has severity number %d, want 19", e.SeverityNumber)
	}
	if ec.Stats().Errors != 0 {
		t.Error("an error-level log counted as an error of the run")
	}
	if n := strings.Count(out.String(), "\n"); n != 2 {
		t.Errorf("the text handler wrote %d lines, want the 2 at error level:\n%s", n, out.String())
	}
}

// TestConcurrent logs from many goroutines through handlers derived from
// one another (run it with -race).
func TestConcurrent(t *testing.T) {
	var mu sync.Mutex
	var out bytes.Buffer
	base := slog.New(tracelog.New(slog.NewJSONHandler(&lockedWriter{&mu, &out}, nil), nil)).With("svc", "x")
	ctx, ec := trace.New(trace.Options{}).Start(context.Background(), "main", trace.RunOptions{})
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			l := base.WithGroup("w").With("i", i)
			for j := range 50 {
				l.InfoContext(ctx, "tick", "j", j)
			}
		})
	}
	wg.Wait()
	ls := logs(ec.Records())
	if len(ls) != 400 {
		t.Fatalf("%d log records, want 400", len(ls))
	}
	for _, r := range ls {
		a := attrsOf(t, r)
		w, _ := a["w"].(map[string]any)
		if a["svc"] != "x" || w == nil || w["i"] == nil || w["j"] == nil {
			t.Fatalf("attributes %v", a)
		}
	}
	if n := strings.Count(out.String(), "\n"); n != 400 {
		t.Errorf("%d JSON lines, want 400", n)
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func TestSeverity(t *testing.T) {
	for l, want := range map[slog.Level]int{slog.LevelDebug: 5, slog.LevelInfo: 9, slog.LevelWarn: 13, slog.LevelError: 17, -100: 1, 100: 24, slog.LevelInfo + 1: 10} {
		if got := tracelog.Severity(l); got != want {
			t.Errorf("Severity(%v) = %d, want %d", l, got, want)
		}
	}
}
