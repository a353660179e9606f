package mcp

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/loupe-dev/loupe/trace"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// A Result is what a tool call returned, within the Client's
// MaxResultBytes.
type Result struct {
	// Text is the text blocks of the content joined by newlines: what a
	// model reads. When it was longer than the limit it is cut, at a
	// character boundary, and ends with a line saying how much was cut.
	Text string
	// Content is the content blocks as a JSON array, as the server sent
	// them (images and resources included); nil when it was over the
	// limit.
	Content json.RawMessage
	// Structured is the result's structuredContent, nil when there was
	// none or it was over the limit.
	Structured json.RawMessage
	// IsError is the result's isError: the tool ran and failed.
	IsError bool
	// Truncated reports that Text was cut or Content or Structured
	// dropped for the limit.
	Truncated bool
	// allText reports that every content block is text, so that Text
	// says all Content does.
	allText bool
}

// newResult converts res, keeping at most max bytes of each part (no
// limit when max < 0).
func newResult(res *mcpsdk.CallToolResult, max int) Result {
	r := Result{IsError: res.IsError, allText: true}
	var texts []string
	for _, b := range res.Content {
		if t, ok := b.(*mcpsdk.TextContent); ok {
			texts = append(texts, t.Text)
		} else {
			r.allText = false
		}
	}
	r.Text = strings.Join(texts, "\n")
	if max >= 0 && len(r.Text) > max {
		head := trace.TruncateUTF8(r.Text, max)
		r.Text = head + fmt.Sprintf("\n[truncated by Loupe: %d of %d bytes shown (Server.MaxResultBytes)]", len(head), len(r.Text))
		r.Truncated = true
	}
	content := res.Content
	if content == nil {
		content = []mcpsdk.Content{}
	}
	if b, err := json.Marshal(content); err == nil {
		r.Content = b
	}
	if res.StructuredContent != nil {
		if b, err := json.Marshal(res.StructuredContent); err == nil {
			r.Structured = b
		}
	}
	if max >= 0 && len(r.Content) > max {
		r.Content, r.Truncated = nil, true
	}
	if max >= 0 && len(r.Structured) > max {
		r.Structured, r.Truncated = nil, true
	}
	return r
}

// JSON returns r as the agent runtime hands it to the model and records it
// as the tool call's output: an object with the server, the tool, the
// text, the raw content when its blocks are not all text (the text says
// all the rest do), structuredContent when there is some, isError and
// truncated when true:
//
//	{"server":"fs","tool":"read_text_file","text":"hello"}
func (r Result) JSON(server, tool string) json.RawMessage {
	out := struct {
		Server     string          `json:"server"`
		Tool       string          `json:"tool"`
		Text       string          `json:"text"`
		Content    json.RawMessage `json:"content,omitempty"`
		Structured json.RawMessage `json:"structuredContent,omitempty"`
		IsError    bool            `json:"isError,omitempty"`
		Truncated  bool            `json:"truncated,omitempty"`
	}{Server: server, Tool: tool, Text: r.Text, Structured: r.Structured, IsError: r.IsError, Truncated: r.Truncated}
	if !r.allText {
		out.Content = r.Content
	}
	b, err := json.Marshal(out)
	if err != nil { // the raw parts are the SDK's valid JSON; cannot happen
		b, _ = json.Marshal(map[string]string{"server": server, "tool": tool, "text": r.Text})
	}
	return b
}
