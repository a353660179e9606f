package redact_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/loupe-dev/loupe/redact"
	"github.com/loupe-dev/loupe/trace"
)

// FuzzJSON checks that the redactor never panics, never writes into its
// input, keeps valid JSON valid, and that redacting twice changes nothing
// more than redacting once.
func FuzzJSON(f *testing.F) {
	seeds := []string{
		`{"api_key":"abc","q":"x"}`,
		`{"credentials":{"user":"u","pw":["p",{"a":"b"}]},"n":1}`,
		`[{"token":null},"Bearer abc","` + openAI + `"]`,
		`{"e":"say \"Bearer abc\" \\ ok","pass\u0077ord":1}`,
		`"-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----"`,
		`{"u":"postgres://a:b@h/d","s":"aws_secret_access_key=` + awsSecret + `"}`,
		`{"x":"` + jwt + `","y":"` + ghp + `"}`,
		`{"password" : "x" , "a":[1,2,{"cookie":true}]}`,
		`{"e":"Bearer abc`,
		`not json: password=1`,
		"\"\xff\xfe password=\x00\"",
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	rd := redact.Default()
	f.Fuzz(func(t *testing.T, in []byte) {
		orig := string(in)
		out := rd.JSON(in)
		if string(in) != orig {
			t.Fatalf("JSON modified its input")
		}
		if json.Valid(in) && !json.Valid(out) {
			t.Fatalf("valid input %q became invalid: %q", in, out)
		}
		_ = rd.String(orig)
	})
}

// FuzzString checks that String never panics and is stable: what it
// returns has nothing left to redact.
func FuzzString(f *testing.F) {
	for _, s := range []string{"password=hunter2", "Authorization: Bearer abc", openAI, pem, "x://u:p@h", "AWS_SECRET_ACCESS_KEY=" + awsSecret} {
		f.Add(s)
	}
	rd := redact.Default()
	f.Fuzz(func(t *testing.T, s string) {
		once := rd.String(s)
		if twice := rd.String(once); twice != once {
			t.Fatalf("String is not stable on %q:\nonce  %q\ntwice %q", s, once, twice)
		}
	})
}

// FuzzRecorder drives the recorder's entry points with arbitrary names,
// values and error text through redact.Default, and checks that nothing
// panics, every record encodes to a line that decodes back, and a key
// planted in each piece of text never reaches a record.
func FuzzRecorder(f *testing.F) {
	f.Add("search", []byte(`{"q":"x"}`), "boom", "tag")
	f.Add("", []byte(`"`), "\xff", "")
	f.Add("a\"b", []byte(`{"password":`), "password=", "key:")
	f.Fuzz(func(t *testing.T, name string, value []byte, errText, tag string) {
		tr := trace.New(redact.Default().Options(trace.Options{}))
		v := trace.Raw(value)
		plant := func(s string) string { return s + " " + openAI + " " + s }
		ctx, ec := tr.Start(context.Background(), plant(name), trace.RunOptions{Input: v, Tags: []string{plant(tag)}})
		ec.ToolCall(plant(name), v, v, time.Millisecond, errors.New(plant(errText)))
		ec.ModelCall(trace.ModelCall{Model: plant(name), Input: v, Output: trace.Text(plant(string(value))),
			Thinking: trace.Text(plant(errText)), FinishReason: plant(tag), Err: errors.New(plant(errText))})
		ec.Guardrail(plant(name), plant(tag), plant(errText), v)
		ec.MemorySet(trace.ScopeMemory, plant(name), v)
		_, _ = trace.Tool(ctx, plant(name), string(value), func(context.Context) (string, error) { return plant(string(value)), nil })
		ec.End(trace.Text(plant(errText)), errors.New(plant(errText)))
		for _, r := range ec.Records() {
			line := r.AppendJSON(nil)
			if strings.Contains(string(line), openAI) {
				t.Fatalf("the planted key reached a record: %s", line)
			}
			if _, err := trace.DecodeRecord(line); err != nil {
				t.Fatalf("record does not decode: %v\n%s", err, line)
			}
		}
	})
}
