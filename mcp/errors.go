package mcp

import (
	"strconv"
	"strings"
)

// An Error reports a failure to reach an MCP server or of a call to one of
// its tools. Its message names the server and the tool, and for a stdio
// server that exited, how it exited and the end of its stderr.
type Error struct {
	Server string // the server's name
	Tool   string // the tool's name on the server; empty when not about one call
	Err    error  // what went wrong
	// Exit says how a stdio server's process exited ("exit status 1",
	// "signal: killed"), when it did.
	Exit string
	// Stderr is the end of a stdio server's stderr, when it has exited.
	Stderr string
	// Result is the result of a call the server marked isError; nil for
	// other failures.
	Result *Result
}

// Error returns, for example:
//
//	mcp server "fs", tool "read_file": the server closed the connection; it exited with exit status 1; its stderr ends with: "EACCES: …"
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("mcp server ")
	b.WriteString(strconv.Quote(e.Server))
	if e.Tool != "" {
		b.WriteString(", tool ")
		b.WriteString(strconv.Quote(e.Tool))
	}
	b.WriteString(": ")
	if e.Err != nil {
		b.WriteString(e.Err.Error())
	} else {
		b.WriteString("failed")
	}
	if e.Exit != "" {
		b.WriteString("; it exited with ")
		b.WriteString(e.Exit)
	}
	if s := strings.TrimSpace(e.Stderr); s != "" {
		b.WriteString("; its stderr ends with: ")
		b.WriteString(strconv.Quote(s))
	}
	return b.String()
}

// Unwrap returns e.Err.
func (e *Error) Unwrap() error { return e.Err }
