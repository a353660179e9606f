package mcpserver

import (
	"context"
	"errors"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/trace"
)

// The tools that read what teams record about quality: sessions (the
// runs of one conversation) and scores (of traces, spans and sessions).
// Both only read, so a read key may call them.

// ListSessionsInput is list_sessions' arguments.
type ListSessionsInput struct {
	User  string `json:"user,omitempty" jsonschema:"only sessions of this user (exact)"`
	Since string `json:"since,omitempty" jsonschema:"only runs started since: 24h, 7d, a date or RFC 3339"`
	Limit int    `json:"limit,omitempty" jsonschema:"most sessions to return (default 20, at most 200)"`
}

// ListSessionsOutput is list_sessions' result.
type ListSessionsOutput struct {
	Sessions []store.SessionSummary `json:"sessions"`
}

// ListScoresInput is list_scores' arguments: a trace, or a session.
type ListScoresInput struct {
	TraceID string `json:"trace_id,omitempty" jsonschema:"the trace whose scores (of the trace and of its spans) to list: its id or a unique prefix of at least 4 hex digits"`
	Session string `json:"session,omitempty" jsonschema:"the session whose own scores to list (instead of trace_id)"`
	Name    string `json:"name,omitempty" jsonschema:"only scores of this name"`
	Limit   int    `json:"limit,omitempty" jsonschema:"most scores to return (default 20, at most 200)"`
}

// ListScoresOutput is list_scores' result, newest first.
type ListScoresOutput struct {
	Scores []Score `json:"scores"`
}

// Score is one score as list_scores returns it: store.Score with its ids
// as hex strings.
type Score struct {
	ID       string    `json:"id"`
	TraceID  string    `json:"trace_id,omitempty"`
	SpanID   string    `json:"span_id,omitempty"`
	Session  string    `json:"session,omitempty"`
	Name     string    `json:"name"`
	Kind     string    `json:"kind" jsonschema:"numeric, boolean (value 1 or 0) or categorical (category)"`
	Value    float64   `json:"value"`
	Category string    `json:"category,omitempty"`
	Comment  string    `json:"comment,omitempty"`
	Source   string    `json:"source" jsonschema:"human, api, eval or online"`
	Author   string    `json:"author,omitempty"`
	Rule     string    `json:"rule,omitempty" jsonschema:"the online evaluation rule that gave it"`
	Time     time.Time `json:"time"`
}

func (s *Server) addQualityTools(limit func(p map[string]*jsonschema.Schema)) {
	mcp.AddTool(s.mcp, &mcp.Tool{
		Name:        "list_sessions",
		Description: "List sessions (the runs of one conversation or task), the latest first, with their runs, first and last times, tokens, cost and errors; filter by user and time. Get a session's runs with search_traces and the query session:ID.",
		InputSchema: schemaFor[ListSessionsInput](func(p map[string]*jsonschema.Schema) {
			limit(p)
			p["user"].MaxLength = ptr(store.MaxSessionBytes)
		}),
		Annotations: &mcp.ToolAnnotations{Title: "List sessions", ReadOnlyHint: true},
	}, safe(s.log, s.listSessionsTool))
	mcp.AddTool(s.mcp, &mcp.Tool{
		Name:        "list_scores",
		Description: "List the scores given to a trace (and its spans) or to a session: thumbs, numbers and categories from people, programs, loupe eval and online evaluation rules, with who gave them, when, and their comment (an online grader's explanation).",
		InputSchema: schemaFor[ListScoresInput](func(p map[string]*jsonschema.Schema) {
			limit(p)
			p["trace_id"].Pattern = "^[0-9a-fA-F]{4,32}$"
			p["session"].MaxLength = ptr(store.MaxSessionBytes)
			p["name"].MaxLength = ptr(store.MaxScoreNameBytes)
		}),
		Annotations: &mcp.ToolAnnotations{Title: "List scores", ReadOnlyHint: true},
	}, safe(s.log, s.listScoresTool))
}

func (s *Server) listSessionsTool(ctx context.Context, _ *mcp.CallToolRequest, in ListSessionsInput) (*mcp.CallToolResult, ListSessionsOutput, error) {
	q := store.SessionQuery{User: in.User, Limit: in.Limit}
	if q.Limit <= 0 {
		q.Limit = defaultListLimit
	}
	if in.Since != "" {
		f, err := store.Criteria{Since: in.Since}.Filter(time.Now())
		if err != nil {
			return nil, ListSessionsOutput{}, toolError("%v", err)
		}
		q.Since = f.Since
	}
	// The optional interfaces are the store's own; its errors are marked
	// as taggedStore marks them.
	page, err := store.ListSessions(ctx, s.o.Store, q)
	if errors.Is(err, store.ErrNoSessions) {
		return nil, ListSessionsOutput{}, toolError("this store does not keep sessions")
	}
	if err != nil {
		return nil, ListSessionsOutput{}, s.storeError(ctx, "listing sessions", failure(err))
	}
	out := ListSessionsOutput{Sessions: page.Sessions}
	if out.Sessions == nil {
		out.Sessions = []store.SessionSummary{}
	}
	for i := range out.Sessions {
		if s.rd != nil {
			out.Sessions[i].ID, out.Sessions[i].User = s.rd.String(out.Sessions[i].ID), s.rd.String(out.Sessions[i].User)
		}
	}
	return nil, out, nil
}

func (s *Server) listScoresTool(ctx context.Context, _ *mcp.CallToolRequest, in ListScoresInput) (*mcp.CallToolResult, ListScoresOutput, error) {
	sc, ok := s.o.Store.(store.Scorer)
	if !ok {
		return nil, ListScoresOutput{}, toolError("this store does not keep scores")
	}
	f := store.ScoreFilter{Name: in.Name, Session: in.Session, Limit: in.Limit}
	if f.Limit <= 0 {
		f.Limit = defaultListLimit
	}
	switch {
	case in.TraceID != "" && in.Session != "":
		return nil, ListScoresOutput{}, toolError("give trace_id or session, not both")
	case in.TraceID != "":
		id, err := store.Resolve(ctx, s.st, in.TraceID)
		if err != nil {
			if errors.Is(err, store.ErrNotFound) {
				return nil, ListScoresOutput{}, toolError("no trace %s", clip(in.TraceID))
			}
			return nil, ListScoresOutput{}, toolError("%v", err)
		}
		f.TraceIDs = []trace.TraceID{id}
	case in.Session == "":
		return nil, ListScoresOutput{}, toolError("give the trace_id of a trace or a session whose scores to list")
	}
	page, err := sc.Scores(ctx, f)
	if err != nil {
		var qe *store.QueryError
		if errors.As(err, &qe) {
			return nil, ListScoresOutput{}, toolError("%v", err)
		}
		return nil, ListScoresOutput{}, s.storeError(ctx, "listing scores", failure(err))
	}
	out := ListScoresOutput{Scores: make([]Score, 0, len(page.Scores))}
	for _, sc := range page.Scores {
		v := Score{ID: sc.ID, Session: sc.Session, Name: sc.Name, Kind: string(sc.Kind), Value: sc.Value, Category: sc.Category,
			Comment: sc.Comment, Source: string(sc.Source), Author: sc.Author, Rule: sc.Rule, Time: sc.Time}
		if !sc.TraceID.IsZero() {
			v.TraceID = sc.TraceID.String()
		}
		if !sc.SpanID.IsZero() {
			v.SpanID = sc.SpanID.String()
		}
		if s.rd != nil {
			v.Comment = s.rd.String(v.Comment)
		}
		out.Scores = append(out.Scores, v)
	}
	return nil, out, nil
}
