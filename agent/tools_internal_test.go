package agent

import (
	"encoding/json"
	"reflect"
	"testing"
)

// The hand-built model.call values must say what json.Marshal says of the
// same data (json.Marshal also escapes <, > and & inside raw inputs, which
// changes the bytes but not the value).
func TestRequestAndResponseValuesMatchEncodingJSON(t *testing.T) {
	calls := []ToolCall{{ID: "c1", Name: "search", Input: json.RawMessage(`{"q":"<go> & \"quotes\""}`)}, {ID: "c2", Name: "none"}}
	msgs := []Message{
		{Role: RoleSystem, Content: "be brief"},
		{Role: RoleAssistant, Content: "line\nbreak\t\u2028", Thinking: "hmm é", ToolCalls: calls},
		{Role: RoleTool, Content: "boom", ToolCallID: "c1", Name: "search", IsError: true},
		{Role: RoleUser, Content: "\x01 control"},
	}
	req := Request{Messages: msgs, Tools: []ToolDef{{Name: "search"}}}
	want, err := json.Marshal(struct {
		Messages int       `json:"messages"`
		Tools    int       `json:"tools,omitempty"`
		New      []Message `json:"new"`
	}{len(msgs), 1, msgs[2:]})
	if err != nil {
		t.Fatal(err)
	}
	if got := appendRequest(nil, req); !sameJSON(t, got, want) {
		t.Errorf("appendRequest\n got %s\nwant %s", got, want)
	}
	// calls[1] has no input, which json.Marshal encodes as null.
	for _, resp := range []Response{{Content: "ok", ToolCalls: calls}, {ToolCalls: calls[:1]}} {
		want, err := json.Marshal(struct {
			Content   string     `json:"content,omitempty"`
			ToolCalls []ToolCall `json:"tool_calls"`
		}{resp.Content, resp.ToolCalls})
		if err != nil {
			t.Fatal(err)
		}
		if got := appendResponse(nil, resp); !sameJSON(t, got, want) {
			t.Errorf("appendResponse\n got %s\nwant %s", got, want)
		}
	}
}

func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatalf("%s: %v", a, err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return reflect.DeepEqual(x, y)
}
