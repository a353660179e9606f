package redact_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/loupe-dev/loupe/redact"
	"github.com/loupe-dev/loupe/trace"
)

// A tool result of about 1 KiB, typical of a search tool, with nothing
// secret in it but words that look like it ("tokens", keys, colons).
var cleanJSON = []byte(`{"query":"battery life of the x1 carbon","max_tokens":1024,"results":[` +
	strings.Repeat(`{"title":"Lenovo ThinkPad review: battery, keyboard and screen","url":"https://example.com/review/123","snippet":"The battery lasted 11 hours in our test; the tokenizer said 1200 tokens."},`, 5) +
	`{"title":"end"}]}`)

var secretJSON = []byte(`{"query":"deploy","api_key":"abc123","env":{"OPENAI_API_KEY":"` + openAI + `","note":"Authorization: Bearer abc.def"}}`)

func BenchmarkJSON(b *testing.B) {
	rd := redact.Default()
	for _, c := range []struct {
		name string
		v    []byte
	}{{"clean-1KiB", cleanJSON}, {"secrets", secretJSON}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.v)))
			b.ReportAllocs()
			for b.Loop() {
				rd.JSON(c.v)
			}
		})
	}
}

func BenchmarkString(b *testing.B) {
	rd := redact.Default()
	for _, c := range []struct{ name, s string }{
		{"clean-error", "tool search: context deadline exceeded after 3 retries (last status 503)"},
		{"clean-name", "calculator"},
		{"secret-error", "openai: 401 Incorrect API key provided: " + openAI},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				rd.String(c.s)
			}
		})
	}
}

// BenchmarkToolCall is trace's BenchmarkRecord (one small tool call)
// without and with redact.Default switched on: what the redactor adds to
// each recorded tool call.
func BenchmarkToolCall(b *testing.B) {
	for _, c := range []struct {
		name string
		o    trace.Options
	}{{"off", trace.Options{}}, {"default", redact.Default().Options(trace.Options{})}} {
		b.Run(c.name, func(b *testing.B) {
			tr := trace.New(c.o)
			in, out := trace.Raw([]byte(`{"expr":"6*7"}`)), trace.Raw([]byte(`42`))
			_, ec := tr.Start(context.Background(), "bench", trace.RunOptions{})
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				ec.ToolCall("calculator", in, out, 50*time.Microsecond, nil)
				if n++; n == 1000 {
					ec.End(nil, nil)
					_, ec = tr.Start(context.Background(), "bench", trace.RunOptions{})
					n = 0
				}
			}
		})
	}
}
