package einotrace_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cloudwego/eino/components/model"
	"github.com/cloudwego/eino/components/tool"
	"github.com/cloudwego/eino/components/tool/utils"
	"github.com/cloudwego/eino/compose"
	"github.com/cloudwego/eino/flow/agent"
	"github.com/cloudwego/eino/flow/agent/react"
	"github.com/cloudwego/eino/schema"

	einotrace "github.com/loupe-dev/loupe/adapters/eino"
	"github.com/loupe-dev/loupe/trace"
)

// --- harness ---------------------------------------------------------------

// collector is a trace.Sink keeping every record it is sent.
type collector struct {
	mu   sync.Mutex
	recs []trace.Record
}

func (c *collector) WriteRecords(_ context.Context, recs []trace.Record) error {
	c.mu.Lock()
	c.recs = append(c.recs, recs...)
	c.mu.Unlock()
	return nil
}

// traces returns the records sent so far, by trace, in Seq order.
func (c *collector) traces() map[trace.TraceID][]trace.Record {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[trace.TraceID][]trace.Record{}
	for _, r := range c.recs {
		out[r.TraceID] = append(out[r.TraceID], r)
	}
	for id := range out {
		slices.SortFunc(out[id], func(a, b trace.Record) int { return int(a.Seq) - int(b.Seq) })
	}
	return out
}

// one returns the records of the one trace sent so far.
func (c *collector) one(t *testing.T) []trace.Record {
	t.Helper()
	ts := c.traces()
	if len(ts) != 1 {
		t.Fatalf("got %d traces, want 1", len(ts))
	}
	for _, recs := range ts {
		return recs
	}
	return nil
}

// newHandler returns a Handler recording through a tracer whose records
// the collector receives.
func newHandler(t *testing.T, opts ...einotrace.Option) (*einotrace.Handler, *collector) {
	t.Helper()
	col := &collector{}
	tr := trace.New(trace.Options{Sinks: []trace.Sink{col}, Dispatch: trace.DispatchOptions{Inline: true}})
	h, err := einotrace.New(tr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return h, col
}

// wait waits for the Handler to have recorded everything; the deadline
// only keeps a broken test from hanging.
func wait(t *testing.T, h *einotrace.Handler) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := h.Wait(ctx); err != nil {
		t.Fatalf("Wait: %v", err)
	}
}

func ofType(recs []trace.Record, typ trace.Type) []trace.Record {
	var out []trace.Record
	for _, r := range recs {
		if r.Type == typ {
			out = append(out, r)
		}
	}
	return out
}

func named(recs []trace.Record, typ trace.Type, name string) []trace.Record {
	var out []trace.Record
	for _, r := range ofType(recs, typ) {
		if r.Name == name {
			out = append(out, r)
		}
	}
	return out
}

func oneOf(t *testing.T, recs []trace.Record, typ trace.Type, name string) trace.Record {
	t.Helper()
	rs := named(recs, typ, name)
	if len(rs) != 1 {
		t.Fatalf("got %d %s records named %q, want 1; records:\n%s", len(rs), typ, name, dump(recs))
	}
	return rs[0]
}

func dump(recs []trace.Record) string {
	var b strings.Builder
	for _, r := range recs {
		b.WriteString(strings.Repeat("  ", r.Depth))
		b.WriteString(string(r.Type) + " " + r.Name)
		if r.Status != "" {
			b.WriteString(" [" + r.Status + "]")
		}
		if r.Error != "" {
			b.WriteString(" error=" + r.Error)
		}
		b.WriteString("\n")
	}
	return b.String()
}

func decode(t *testing.T, v trace.Value) any {
	t.Helper()
	var out any
	if err := json.Unmarshal(v, &out); err != nil {
		t.Fatalf("value %s: %v", v, err)
	}
	return out
}

// --- tools -------------------------------------------------------------------

type weatherIn struct {
	City string `json:"city" jsonschema:"description=the city"`
}

type weatherOut struct {
	City  string `json:"city"`
	TempC int    `json:"temp_c"`
	Sky   string `json:"sky"`
}

type timeIn struct {
	Zone string `json:"zone"`
}

type stockIn struct {
	Symbol string `json:"symbol"`
}

var errStockDown = errors.New("the stock service is down")

func tools(t testing.TB) []tool.BaseTool {
	t.Helper()
	weather, err := utils.InferTool("get_weather", "The weather in a city.", func(_ context.Context, in weatherIn) (weatherOut, error) {
		return weatherOut{City: in.City, TempC: 21, Sky: "sunny"}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	clock, err := utils.InferTool("get_time", "The time in a time zone.", func(_ context.Context, in timeIn) (string, error) {
		return "10:00", nil
	})
	if err != nil {
		t.Fatal(err)
	}
	stock, err := utils.InferTool("get_stock", "A stock's price.", func(_ context.Context, in stockIn) (float64, error) {
		return 0, errStockDown
	})
	if err != nil {
		t.Fatal(err)
	}
	return []tool.BaseTool{weather, clock, stock}
}

func call(id, name, args string) schema.ToolCall {
	return schema.ToolCall{ID: id, Type: "function", Function: schema.FunctionCall{Name: name, Arguments: args}}
}

func usage(prompt, completion, cached, reasoning int) *schema.TokenUsage {
	return &schema.TokenUsage{PromptTokens: prompt, CompletionTokens: completion, TotalTokens: prompt + completion,
		PromptTokenDetails:      schema.PromptTokenDetails{CachedTokens: cached},
		CompletionTokensDetails: schema.CompletionTokensDetails{ReasoningTokens: reasoning}}
}

const weatherAnswer = "It is sunny and 21°C in Paris, and the time is 10:00."

// weatherScript asks for two tools at once, then answers.
func weatherScript() []turn {
	return []turn{
		{msg: &schema.Message{Role: schema.Assistant, ReasoningContent: "I need the weather and the time.",
			ToolCalls:    []schema.ToolCall{call("call_1", "get_weather", `{"city":"Paris"}`), call("call_2", "get_time", `{"zone":"Europe/Paris"}`)},
			ResponseMeta: &schema.ResponseMeta{FinishReason: "tool_calls", Usage: usage(120, 30, 100, 12)}}},
		{msg: &schema.Message{Role: schema.Assistant, Content: weatherAnswer,
			ResponseMeta: &schema.ResponseMeta{FinishReason: "stop", Usage: usage(200, 18, 0, 0)}}},
	}
}

// newModel returns a scripted model playing turns, reporting its own
// callbacks or leaving them to Eino.
func newModel(own bool, name string, turns []turn) model.ToolCallingChatModel {
	s := &script{model: name, turns: turns}
	if own {
		return &ownCallbacksModel{scriptedModel{s: s}}
	}
	return &scriptedModel{s: s}
}

func newAgent(t *testing.T, m model.ToolCallingChatModel, cfg react.AgentConfig) *react.Agent {
	t.Helper()
	cfg.ToolCallingModel = m
	if cfg.ToolsConfig.Tools == nil {
		cfg.ToolsConfig.Tools = tools(t)
	}
	a, err := react.NewAgent(context.Background(), &cfg)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// run runs a with the Handler, by Generate or by Stream (reading the
// stream to its end), and returns the answer.
func run(t *testing.T, a *react.Agent, h *einotrace.Handler, stream bool, question string) (string, error) {
	t.Helper()
	ctx := context.Background()
	msgs := []*schema.Message{schema.UserMessage(question)}
	opt := agent.WithComposeOptions(compose.WithCallbacks(h))
	if !stream {
		msg, err := a.Generate(ctx, msgs, opt)
		if err != nil {
			return "", err
		}
		return msg.Content, nil
	}
	sr, err := a.Stream(ctx, msgs, opt)
	if err != nil {
		return "", err
	}
	defer sr.Close()
	var b strings.Builder
	for {
		m, err := sr.Recv()
		if err == io.EOF {
			return b.String(), nil
		}
		if err != nil {
			return b.String(), err
		}
		b.WriteString(m.Content)
	}
}
