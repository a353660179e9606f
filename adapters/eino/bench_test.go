package einotrace_test

import (
	"context"
	"testing"

	"github.com/cloudwego/eino/components/tool"
	"github.com/cloudwego/eino/compose"
	"github.com/cloudwego/eino/flow/agent"
	"github.com/cloudwego/eino/flow/agent/react"
	"github.com/cloudwego/eino/schema"

	einotrace "github.com/loupe-dev/loupe/adapters/eino"
	"github.com/loupe-dev/loupe/trace"
)

// BenchmarkReActAgent measures what recording costs one run of Eino's
// ReAct agent (two model turns, two parallel tool calls): untraced, and
// recorded by the Handler into a tracer without sinks (records kept in
// memory), by Generate and by Stream.
func BenchmarkReActAgent(b *testing.B) {
	tls := tools(b)
	for _, bc := range []struct {
		name   string
		traced bool
		stream bool
	}{
		{"generate/untraced", false, false},
		{"generate/traced", true, false},
		{"stream/untraced", false, true},
		{"stream/traced", true, true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			ctx := context.Background()
			var opts []agent.AgentOption
			var h *einotrace.Handler
			if bc.traced {
				var err error
				h, err = einotrace.New(trace.New(trace.Options{}))
				if err != nil {
					b.Fatal(err)
				}
				opts = append(opts, agent.WithComposeOptions(compose.WithCallbacks(h)))
			}
			msgs := []*schema.Message{schema.UserMessage("What's the weather in Paris, and the time?")}
			b.ReportAllocs()
			for b.Loop() {
				a, err := react.NewAgent(ctx, &react.AgentConfig{ToolCallingModel: newModel(false, "", weatherScript()),
					ToolsConfig: compose.ToolsNodeConfig{Tools: []tool.BaseTool{tls[0], tls[1]}}})
				if err != nil {
					b.Fatal(err)
				}
				if bc.stream {
					sr, err := a.Stream(ctx, msgs, opts...)
					if err != nil {
						b.Fatal(err)
					}
					drain(sr)
				} else if _, err := a.Generate(ctx, msgs, opts...); err != nil {
					b.Fatal(err)
				}
				if h != nil {
					if err := h.Wait(ctx); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
