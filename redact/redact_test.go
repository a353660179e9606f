package redact_test

import (
	"encoding/json"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/loupe-dev/loupe/redact"
	"github.com/loupe-dev/loupe/trace"
)

// Secrets in the formats of the default rules. They are made up, but
// have the real shapes.
var (
	openAI    = "sk-proj-" + strings.Repeat("Ab3dE", 10)
	openAIOld = "sk-" + strings.Repeat("x1Y2z", 10)
	anthropic = "sk-ant-api03-" + strings.Repeat("Q9w_e", 18)
	google    = "AIza" + strings.Repeat("SyA1b", 7)
	ghp       = "ghp_" + strings.Repeat("a1B2c3", 6)
	ghPAT     = "github_pat_11ABCDEFG0" + strings.Repeat("x_Y9", 12)
	slack     = "xoxb-1234567890-0987654321-" + strings.Repeat("aB", 12)
	stripe    = "sk_live_" + strings.Repeat("4eC39HqLyjWDarjtT1zdp7dc", 1)
	jwt       = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
	awsKey    = "AKIAIOSFODNN7EXAMPLE"
	awsSecret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
	pem       = "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA3Tz2mr7SZiAMfQyuvBjM2Ad\n-----END RSA PRIVATE KEY-----"
)

func TestString(t *testing.T) {
	rd := redact.Default()
	tests := []struct {
		name, in, want string
	}{
		{"openai project key", "key " + openAI + " failed", "key [REDACTED] failed"},
		{"openai key", "Incorrect API key provided: " + openAIOld + ".", "Incorrect API key provided: [REDACTED]."},
		{"anthropic", "x-api-key " + anthropic, "x-api-key [REDACTED]"},
		{"google", "?key=" + google + "&q=1", "?key=[REDACTED]&q=1"},
		{"github classic", "token " + ghp, "token [REDACTED]"},
		{"github fine-grained", ghPAT, "[REDACTED]"},
		{"slack", "slack: " + slack, "slack: [REDACTED]"},
		{"stripe", "charge with " + stripe, "charge with [REDACTED]"},
		{"jwt", "cookie jar " + jwt + " end", "cookie jar [REDACTED] end"},
		{"bearer", "Authorization: Bearer abc.def-123", "Authorization: Bearer [REDACTED]"},
		{"bearer lower", "sent bearer abc123==", "sent bearer [REDACTED]"},
		{"aws access key", "id=" + awsKey + ";", "id=[REDACTED];"},
		{"aws secret env", "AWS_SECRET_ACCESS_KEY=" + awsSecret, "AWS_SECRET_ACCESS_KEY=[REDACTED]"},
		{"aws secret ini", "aws_secret_access_key = " + awsSecret + "\n", "aws_secret_access_key = [REDACTED]\n"},
		{"pem", "key:\n" + pem + "\nrest", "key:\n[REDACTED]\nrest"},
		{"pem cut", "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC", "[REDACTED]"},
		{"url password", "dial postgres://loupe:hunter2@db:5432/x: refused", "dial postgres://loupe:[REDACTED]@db:5432/x: refused"},
		{"password=", "login failed: password=hunter2 user=bob", "login failed: password=[REDACTED] user=bob"},
		{"db_password:", "db_password: 'hunter2'", "db_password: '[REDACTED]'"},
		{"api_key JSON in text", `bad request {"api_key": "abc123"}`, `bad request {"api_key": "[REDACTED]"}`},
		{"token=", "GET /cb?access_token=abc123&x=1", "GET /cb?access_token=[REDACTED]&x=1"},
		{"github inside a word", "fetch_" + ghp, "fetch_[REDACTED]"},
		{"key= of any length", "hook: secret_access_key=abc123", "hook: secret_access_key=[REDACTED]"},
		{"private_key:", "private_key: xyz", "private_key: [REDACTED]"},
		{"two secrets", openAI + " and " + ghp, "[REDACTED] and [REDACTED]"},
		// Left alone.
		{"plain", "the tool timed out after 3s", "the tool timed out after 3s"},
		{"max_tokens", "max_tokens: 1024", "max_tokens: 1024"},
		{"tokens prose", "used 1200 tokens", "used 1200 tokens"},
		{"short sk", "sk-1 is a name", "sk-1 is a name"},
		{"replacement kept", "password=[REDACTED]", "password=[REDACTED]"},
		{"empty", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := rd.String(tt.in); got != tt.want {
				t.Errorf("String(%q)\n got %q\nwant %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestJSON(t *testing.T) {
	rd := redact.Default()
	tests := []struct {
		name, in, want string
	}{
		{"api_key", `{"api_key":"abc","q":"x"}`, `{"api_key":"[REDACTED]","q":"x"}`},
		{"keys of every case and style", `{"X-Api-Key": "a", "openaiApiKey":1, "PASSWORD" : true, "passwd":"p", "client_secret":"s", "access_token":"t", "Authorization":"Basic dXNlcjpw", "Cookie":"sid=1", "set-cookie":"a=b"}`,
			`{"X-Api-Key": "[REDACTED]", "openaiApiKey":"[REDACTED]", "PASSWORD" : "[REDACTED]", "passwd":"[REDACTED]", "client_secret":"[REDACTED]", "access_token":"[REDACTED]", "Authorization":"[REDACTED]", "Cookie":"[REDACTED]", "set-cookie":"[REDACTED]"}`},
		{"object value", `{"credentials":{"user":"u","pw":"p"},"n":1}`, `{"credentials":"[REDACTED]","n":1}`},
		{"array value", `[{"token":["a","b"]},"x"]`, `[{"token":"[REDACTED]"},"x"]`},
		{"null kept", `{"password":null}`, `{"password":null}`},
		{"nested", `{"cfg":{"db":{"password":"hunter2","host":"h"}}}`, `{"cfg":{"db":{"password":"[REDACTED]","host":"h"}}}`},
		{"not sensitive", `{"max_tokens":1024,"tokenizer":"bpe","token_count":3,"key":"k"}`, `{"max_tokens":1024,"tokenizer":"bpe","token_count":3,"key":"k"}`},
		{"secret in a value", `{"msg":"use ` + openAI + ` now"}`, `{"msg":"use [REDACTED] now"}`},
		{"secret in a string", `"` + ghp + `"`, `"[REDACTED]"`},
		{"pem with escapes", mustJSON(map[string]string{"k": pem}), `{"k":"[REDACTED]"}`},
		{"escaped quote kept", `{"e":"say \"Bearer abc\" \\ ok"}`, `{"e":"say \"Bearer [REDACTED]\" \\ ok"}`},
		{"escaped key", `{"pass\u0077ord":"x"}`, `{"pass\u0077ord":"[REDACTED]"}`},
		{"a key that is a secret's name in a value", `{"name":"password","value":"x"}`, `{"name":"password","value":"x"}`},
		{"no strings", `[1,2,3]`, `[1,2,3]`},
		{"not JSON", `Bearer abc and "password": hunter2`, `Bearer [REDACTED] and "password": [REDACTED]`},
		{"plain text", `connect with password=hunter2`, `connect with password=[REDACTED]`},
		{"number", `12345`, `12345`},
		{"unterminated", `{"e":"Bearer abc`, `{"e":"Bearer [REDACTED]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := string(rd.JSON([]byte(tt.in)))
			if got != tt.want {
				t.Errorf("JSON(%s)\n got %s\nwant %s", tt.in, got, tt.want)
			}
			if json.Valid([]byte(tt.in)) && !json.Valid([]byte(got)) {
				t.Errorf("JSON(%s) = %s: no longer valid JSON", tt.in, got)
			}
		})
	}
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func TestUnchangedIsNotCopied(t *testing.T) {
	rd := redact.Default()
	v := []byte(`{"query":"weather in Paris","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`)
	if got := rd.JSON(v); &got[0] != &v[0] {
		t.Error("JSON copied a value with nothing to redact")
	}
	if n := testing.AllocsPerRun(100, func() { rd.JSON(v) }); n != 0 {
		t.Errorf("JSON of a value with nothing to redact: %v allocations, want 0", n)
	}
	s := "tool search failed: connection refused"
	if n := testing.AllocsPerRun(100, func() { rd.String(s) }); n != 0 {
		t.Errorf("String with nothing to redact: %v allocations, want 0", n)
	}
	// The input is never written to.
	in := []byte(`{"password":"hunter2","x":"` + openAI + `"}`)
	before := string(in)
	rd.JSON(in)
	if string(in) != before {
		t.Errorf("JSON modified its input: %s", in)
	}
}

func TestConfig(t *testing.T) {
	c := redact.DefaultConfig().Without("bearer", "assignment").With(redact.Rule{
		Name: "ticket", Keywords: []string{"TICKET-"}, Pattern: regexp.MustCompile(`TICKET-\d+`),
	})
	c.Replacement = "***"
	c.Keys = []string{"ssn"}
	rd, err := redact.New(c)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ in, want string }{
		{"Bearer abc", "Bearer abc"},
		{"password=x", "password=x"},
		{"see TICKET-42", "see ***"},
		{openAI, "***"},
	}
	for _, tt := range tests {
		if got := rd.String(tt.in); got != tt.want {
			t.Errorf("String(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	if got := string(rd.JSON([]byte(`{"user_ssn":"1","password":"p"}`))); got != `{"user_ssn":"***","password":"p"}` {
		t.Errorf("custom keys: got %s", got)
	}
	// Default is untouched by changes to a config derived from it.
	if got := redact.Default().String("Bearer abc"); got != "Bearer [REDACTED]" {
		t.Errorf("Default changed: %q", got)
	}
	if got := len(rd.Config().Rules); got != len(redact.DefaultConfig().Rules)-1 {
		t.Errorf("Config() has %d rules", got)
	}

	var zero redact.Redactor
	if got := zero.String(openAI); got != openAI {
		t.Errorf("zero Redactor changed %q", got)
	}
	var nilRD *redact.Redactor
	if got := string(nilRD.JSON([]byte(`{"password":"x"}`))); got != `{"password":"x"}` {
		t.Errorf("nil Redactor changed %s", got)
	}
}

func TestNewErrors(t *testing.T) {
	re := regexp.MustCompile(`a(b)`)
	tests := []struct {
		name string
		c    redact.Config
		want string
	}{
		{"no name", redact.Config{Rules: []redact.Rule{{Pattern: re}}}, "rule 0 has no name"},
		{"no pattern", redact.Config{Rules: []redact.Rule{{Name: "x"}}}, `rule "x" has no pattern`},
		{"bad group", redact.Config{Rules: []redact.Rule{{Name: "x", Pattern: re, Group: 2}}}, "group 2"},
		{"empty keyword", redact.Config{Rules: []redact.Rule{{Name: "x", Pattern: re, Keywords: []string{""}}}}, "empty keyword"},
		{"empty key", redact.Config{Keys: []string{"__"}}, `key "__"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := redact.New(tt.c)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("New: %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestRecord(t *testing.T) {
	tags := []string{"env:ci", "key:" + openAI}
	in := trace.Value(`{"password":"hunter2"}`)
	r := trace.Record{
		Type: trace.TypeToolError, Name: "fetch " + ghp, Status: "Bearer abc", Error: "401 for " + openAI,
		Input: in, Output: trace.Text(jwt), Thinking: trace.Text("the key is " + anthropic),
		Run: &trace.RunInfo{Tags: tags}, Usage: trace.Usage{Provider: "p " + stripe},
	}
	redact.Default().Record(&r)
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{ghp, "abc", openAI, "hunter2", jwt, anthropic, stripe} {
		if strings.Contains(string(b), s) {
			t.Errorf("record still holds %q: %s", s, b)
		}
	}
	if tags[1] != "key:"+openAI || string(in) != `{"password":"hunter2"}` {
		t.Error("Record wrote into the record's old tags or values")
	}
	if r.Tags()[0] != "env:ci" {
		t.Errorf("tags = %q", r.Tags())
	}
}

func TestOptions(t *testing.T) {
	var seen []trace.Field
	var mu sync.Mutex
	o := redact.Default().Options(trace.Options{
		RedactString: func(r *trace.Record, f trace.Field, s string) string {
			mu.Lock()
			seen = append(seen, f)
			mu.Unlock()
			return strings.ReplaceAll(s, "internal", "x")
		},
	})
	if o.Redact == nil || o.RedactString == nil {
		t.Fatal("Options did not set both hooks")
	}
	if got := o.RedactString(nil, trace.FieldErrorText, "internal "+openAI); got != "x [REDACTED]" {
		t.Errorf("chained hooks: %q", got)
	}
	if len(seen) != 1 {
		t.Errorf("the earlier hook ran %d times", len(seen))
	}
}

func TestConcurrent(t *testing.T) {
	rd := redact.Default()
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				if got := string(rd.JSON([]byte(`{"token":"a","m":"` + openAI + `"}`))); got != `{"token":"[REDACTED]","m":"[REDACTED]"}` {
					t.Errorf("got %s", got)
					return
				}
			}
		}()
	}
	wg.Wait()
}
