// Package llmtest holds checks the providers' tests share. It is imported
// by tests only.
package llmtest

import (
	"context"
	"strings"
	"testing"

	"github.com/loupe-dev/loupe/agent"
	"github.com/loupe-dev/loupe/trace"
)

// FailedCall runs a traced ReAct agent on m, which must fail its model
// call: the run must end with an error that check accepts (nil accepts
// any), and the model.call record's error must contain every string of
// want. It returns that record.
func FailedCall(t *testing.T, m agent.Model, check func(error) bool, want []string) trace.Record {
	t.Helper()
	res := (&agent.Executor{Tracer: trace.New(trace.Options{})}).Run(context.Background(), &agent.ReAct{Model: m}, "Hi")
	if res.Err == nil {
		t.Fatalf("run succeeded: %q", res.Answer)
	}
	if check != nil && !check(res.Err) {
		t.Errorf("error %T %v does not unwrap as expected", res.Err, res.Err)
	}
	var rec *trace.Record
	for i := range res.Records {
		if res.Records[i].Type == trace.TypeModelCall {
			rec = &res.Records[i]
		}
	}
	if rec == nil {
		t.Fatal("no model.call record")
	}
	for _, w := range want {
		if !strings.Contains(rec.Error, w) {
			t.Errorf("model.call error %q lacks %q", rec.Error, w)
		}
	}
	return *rec
}
