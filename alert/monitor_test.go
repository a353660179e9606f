package alert_test

import (
	"strings"
	"testing"
	"time"

	"github.com/loupe-dev/loupe/alert"
)

const goodFile = `# monitors of the production agents
monitors:
  - name: prod-errors
    metric: error_rate
    filter: tag:env:prod
    window: 10m
    every: 1m
    threshold: 0.2
    resolve: 0.1
    for: 2
    webhooks:
      - url: https://hooks.slack.com/services/T000/B000/XXXX
        format: slack
      - url: http://127.0.0.1:9000/hook
  - name: slow
    metric: p95_latency
    window: 1h
    op: ">="
    threshold: 30
  - name: spend
    metric: cost
    window: 1d
    threshold: 50
`

func TestParseFile(t *testing.T) {
	ms, err := alert.ParseFile([]byte(goodFile), "monitors.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 3 {
		t.Fatalf("%d monitors", len(ms))
	}
	m := ms[0]
	if m.Name != "prod-errors" || m.Metric != alert.ErrorRate || m.Filter != "tag:env:prod" || time.Duration(m.Window) != 10*time.Minute ||
		time.Duration(m.Every) != time.Minute || m.Threshold != 0.2 || m.Resolve == nil || *m.Resolve != 0.1 || m.For != 2 ||
		len(m.Webhooks) != 2 || m.Webhooks[0].Format != "slack" {
		t.Errorf("first monitor %+v", m)
	}
	if time.Duration(ms[2].Window) != 24*time.Hour || ms[1].Op != ">=" {
		t.Errorf("%+v %+v", ms[1], ms[2])
	}
}

func TestParseFileErrors(t *testing.T) {
	for _, tt := range []struct{ name, file, want string }{
		{"empty", "", "m.yaml:1:1: the monitors file is empty"},
		{"syntax", "monitors: [", "m.yaml:1:"},
		{"unknown key", "monitors:\n  - name: a\n    metrc: cost\n", "m.yaml:3:5"},
		{"bad window", "monitors:\n  - name: a\n    metric: cost\n    window: soon\n", "m.yaml:4:13: monitor \"a\": window: \"soon\": want a duration"},
		{"no window", "monitors:\n  - name: a\n    metric: cost\n    threshold: 1\n", "m.yaml:2:5: monitor \"a\": window: is missing"},
		{"bad metric", "monitors:\n  - name: a\n    metric: errors\n    window: 5m\n", "m.yaml:3:13: monitor \"a\": metric: \"errors\" is neither built in"},
		{"text filter", "monitors:\n  - name: a\n    metric: cost\n    window: 5m\n    filter: timeout\n", "m.yaml:5:13: monitor \"a\": filter: free text"},
		{"since filter", "monitors:\n  - name: a\n    metric: cost\n    window: 5m\n    filter: since:1h\n", "filter: since: and until: are set by the window"},
		{"bad query", "monitors:\n  - name: a\n    metric: cost\n    window: 5m\n    filter: colour:red\n", "m.yaml:5:13: monitor \"a\": filter: query: unknown filter"},
		{"resolve above", "monitors:\n  - name: a\n    metric: cost\n    window: 5m\n    threshold: 1\n    resolve: 2\n", "m.yaml:6:14: monitor \"a\": resolve: 2 is above the threshold 1"},
		{"resolve below", "monitors:\n  - name: a\n    metric: cost\n    window: 5m\n    op: \"<\"\n    threshold: 1\n    resolve: 0.5\n", "resolve: 0.5 is below the threshold 1"},
		{"bad op", "monitors:\n  - name: a\n    metric: cost\n    window: 5m\n    op: \"!=\"\n", "m.yaml:5:9: monitor \"a\": op:"},
		{"bad url", "monitors:\n  - name: a\n    metric: cost\n    window: 5m\n    webhooks:\n      - url: ftp://x/y\n", "m.yaml:6:14: monitor \"a\": webhooks[0].url: ftp://x/y is not an http"},
		{"bad format", "monitors:\n  - name: a\n    metric: cost\n    window: 5m\n    webhooks:\n      - url: http://x/y\n        format: teams\n", "webhooks[0].format: \"teams\" is not json or slack"},
		{"twice", "monitors:\n  - name: a\n    metric: cost\n    window: 5m\n  - name: a\n    metric: cost\n    window: 5m\n", "m.yaml:5:11: monitor \"a\" is defined twice"},
		{"bad name", "monitors:\n  - name: a b\n    metric: cost\n    window: 5m\n", "m.yaml:2:11: monitor \"a b\": name:"},
		{"score without name", "monitors:\n  - name: a\n    metric: score_mean\n    window: 5m\n", "score: score_mean needs the score's name"},
		{"every too short", "monitors:\n  - name: a\n    metric: cost\n    window: 5m\n    every: 10ms\n", "every: 10ms is out of range"},
		{"negative for", "monitors:\n  - name: a\n    metric: cost\n    window: 5m\n    for: -1\n", "for: -1 is out of range"},
		{"two docs", "monitors: []\n---\nmonitors: []\n", "holds 2 YAML documents"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := alert.ParseFile([]byte(tt.file), "m.yaml", func(string) bool { return false })
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v; want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestRedactURL(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"https://hooks.slack.com/services/T000/B000/XXXXXXXX", "https://hooks.slack.com/services/…"},
		{"https://example.com/hook", "https://example.com/hook"},
		{"https://example.com/", "https://example.com"},
		{"https://example.com/hook?token=abc", "https://example.com/hook/…"},
		{"https://user:pass@example.com/hook", "https://example.com/hook/…"},
		{"https://example.com/0123456789abcdef0123456789abcdef", "https://example.com/…"},
		{"http://127.0.0.1:9000/flaky", "http://127.0.0.1:9000/flaky"},
		{"::", "(a malformed URL)"},
	} {
		if got := alert.RedactURL(tt.in); got != tt.want {
			t.Errorf("RedactURL(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func FuzzParseFile(f *testing.F) {
	f.Add([]byte(goodFile))
	f.Add([]byte("monitors:\n  - name: a\n    metric: cost\n    window: 5m\n    webhooks:\n      - url: http://x/y\n"))
	f.Add([]byte("monitors: [{name: a, metric: cost, window: 1d, resolve: -1e308}]"))
	f.Add([]byte("monitors:\n  - !!binary x\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		ms, err := alert.ParseFile(data, "f.yaml", nil)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "f.yaml") {
				t.Errorf("error without the file name: %v", err)
			}
			return
		}
		for _, m := range ms {
			if err := m.Validate(nil); err != nil {
				t.Errorf("ParseFile returned an invalid monitor %+v: %v", m, err)
			}
		}
	})
}
