package redact_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loupe-dev/loupe/export/jsonl"
	"github.com/loupe-dev/loupe/redact"
	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/store/sqlite"
	"github.com/loupe-dev/loupe/trace"
)

// planted is one secret put into one field of a run: body is the part
// that must not survive (a word the store's search can look for), text is
// the secret as the field carries it.
type planted struct {
	field      string
	body       string
	text       string
	searchable bool // the field is one `loupe traces search` looks in
}

// body returns a secret-looking word made for field, so that a leak names
// the field it came from.
func body(field string) string {
	return "Zq8" + strings.ToUpper(field) + strings.Repeat("k2W", 8)
}

func plant() []planted {
	p := func(field, text string, searchable bool) planted {
		return planted{field, body(field), strings.ReplaceAll(text, "BODY", body(field)), searchable}
	}
	return []planted{
		p("runname", "nightly xoxb-BODY", true),
		p("runinput", `{"password":"BODY"}`, true),
		p("tag", "owner:sk-proj-BODY", false),
		p("toolinput", `{"q":"weather","api_key":"BODY"}`, true),
		p("tooloutput", `{"token":"sk-proj-BODY"}`, true),
		p("toolerror", "401 Unauthorized: invalid key sk-ant-api03-BODY", true),
		p("toolname", "fetch_ghp_BODY", true),
		p("modelinput", `{"messages":[{"role":"user","content":"my key is sk-BODY"}]}`, true),
		p("modeloutput", "Use Authorization: Bearer BODY", true),
		p("thinking", "The user pasted sk-proj-BODY, I must not repeat it", true),
		p("modelerror", "request failed: Bearer BODY rejected", true),
		p("finish", "stop sk_live_BODY", false),
		p("provider", "AIza"+body("provider")[:35], false),
		p("ecerror", "dial postgres://loupe:BODY@db:5432/x: refused", true),
		p("guardrail", "output contained password=BODY", true),
		p("guarddetails", `{"match":"sk-proj-BODY"}`, true),
		p("memorykey", "cache.sk-proj-BODY", true),
		p("memoryvalue", `{"cookie":"BODY"}`, true),
		p("hookerror", "hook: secret_access_key=BODY", true),
		p("result", `{"answer":"42","access_token":"BODY"}`, true),
		p("finisherror", "giving up: password: BODY", true),
		p("iteration", "continue token=BODY", false),
	}
}

// record runs one traced run that carries every planted secret, into a
// JSONL file and a SQLite store in dir, with o's redaction hooks.
func record(t *testing.T, dir string, secrets []planted, redacted bool) (jsonlPath, dbPath string) {
	t.Helper()
	ctx := context.Background()
	jsonlPath, dbPath = filepath.Join(dir, "trace.jsonl"), filepath.Join(dir, "loupe.db")
	js, err := jsonl.Create(jsonlPath)
	if err != nil {
		t.Fatal(err)
	}
	st, err := sqlite.Open(ctx, dbPath)
	if err != nil {
		t.Fatal(err)
	}
	o := trace.Options{Sinks: []trace.Sink{js, store.NewSink(st)}}
	if redacted {
		o = redact.Default().Options(o)
	}
	tr := trace.New(o)
	s := map[string]string{}
	for _, p := range secrets {
		s[p.field] = p.text
	}
	run, ec := tr.Start(ctx, s["runname"], trace.RunOptions{Input: trace.Raw([]byte(s["runinput"])), Tags: []string{"env:ci", s["tag"]}})
	ec.StartIteration()
	ec.ToolCall(s["toolname"], trace.Raw([]byte(s["toolinput"])), trace.Raw([]byte(s["tooloutput"])), time.Millisecond, nil)
	ec.ToolCall("search", trace.Raw([]byte(`{"q":"canary"}`)), nil, time.Millisecond, errors.New(s["toolerror"]))
	ec.ModelCall(trace.ModelCall{Model: "gpt-x", Input: trace.Raw([]byte(s["modelinput"])), Output: trace.Text(s["modeloutput"]),
		Thinking: trace.Text(s["thinking"]), FinishReason: s["finish"], Usage: trace.Usage{Provider: s["provider"], InputTokens: 10}})
	ec.ModelCall(trace.ModelCall{Model: "gpt-x", Input: trace.Text("hi"), Err: errors.New(s["modelerror"])})
	ec.Error(errors.New(s["ecerror"]))
	ec.Guardrail("no-secrets", "warn", s["guardrail"], trace.Raw([]byte(s["guarddetails"])))
	ec.MemorySet(trace.ScopeGlobal, s["memorykey"], trace.Raw([]byte(s["memoryvalue"])))
	_, _ = trace.Tool(run, "calculator", 1, func(context.Context) (int, error) { return 2, nil })
	hook := ec.StartSpan(trace.SpanHook, "before_tool", nil)
	hook.End(nil, errors.New(s["hookerror"]))
	ec.EndIteration(s["iteration"])
	ec.End(trace.Raw([]byte(s["result"])), errors.New(s["finisherror"]))
	if err := tr.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if err := js.Close(); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	return jsonlPath, dbPath
}

// storeBytes returns the bytes of the SQLite store's files: the database
// and, if they are left, its WAL and shared-memory files.
func storeBytes(t *testing.T, db string) string {
	var b strings.Builder
	for _, suffix := range []string{"", "-wal", "-shm"} {
		data, err := os.ReadFile(db + suffix)
		if err != nil && !(suffix != "" && os.IsNotExist(err)) {
			t.Fatal(err)
		}
		b.Write(data)
	}
	return b.String()
}

// search runs what `loupe traces search WORD` runs and returns its hits.
func search(t *testing.T, db, word string) []store.Hit {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := time.Now()
	q, err := store.ParseQueryAt(word, now)
	if err == nil {
		q, err = store.Criteria{}.Query(q, now)
	}
	if err != nil {
		t.Fatal(err)
	}
	res, err := st.Search(ctx, q)
	if err != nil {
		t.Fatalf("search %s: %v", word, err)
	}
	return res.Hits
}

// TestNoSecretReachesFileStoreOrSearch plants a secret in every field a
// run can carry one in and checks that with redact.Default on, none
// reaches the JSONL file, the store's file bytes or search. The same run
// without redaction is the control: it shows each secret does land in
// each of those places, so the check can fail.
func TestNoSecretReachesFileStoreOrSearch(t *testing.T) {
	secrets := plant()
	t.Run("control without redaction", func(t *testing.T) {
		jf, db := record(t, t.TempDir(), secrets, false)
		file, err := os.ReadFile(jf)
		if err != nil {
			t.Fatal(err)
		}
		stored := storeBytes(t, db)
		for _, p := range secrets {
			if !strings.Contains(string(file), p.body) {
				t.Errorf("%s: the JSONL file does not hold the secret even without redaction", p.field)
			}
			if !strings.Contains(stored, p.body) {
				t.Errorf("%s: the store does not hold the secret even without redaction", p.field)
			}
			if p.searchable && len(search(t, db, p.body)) == 0 {
				t.Errorf("%s: search does not find the secret even without redaction", p.field)
			}
		}
	})
	t.Run("redacted", func(t *testing.T) {
		jf, db := record(t, t.TempDir(), secrets, true)
		file, err := os.ReadFile(jf)
		if err != nil {
			t.Fatal(err)
		}
		stored := storeBytes(t, db)
		for _, p := range secrets {
			if strings.Contains(string(file), p.body) {
				t.Errorf("%s: the JSONL file holds the secret", p.field)
			}
			if strings.Contains(stored, p.body) {
				t.Errorf("%s: the store's files hold the secret", p.field)
			}
			if hits := search(t, db, p.body); len(hits) > 0 {
				t.Errorf("%s: search finds the secret: %+v", p.field, hits[0])
			}
		}
		// What is not secret is still there and still found.
		for _, want := range []string{"canary", "env:ci", "[REDACTED]", "calculator", "gpt-x", "no-secrets"} {
			if !strings.Contains(string(file), want) {
				t.Errorf("the JSONL file lost %q", want)
			}
		}
		if len(search(t, db, "canary")) == 0 {
			t.Error("search no longer finds what was not secret")
		}
	})
}
