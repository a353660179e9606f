package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/trace"
)

// The tools of what teams record about quality: sessions (the runs of one
// conversation) and scores (of traces, spans and sessions). list_sessions
// and list_scores only read, so a read key may call them; add_score
// writes, so it takes an admin key (scope.go).

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
	s.addScoreTool()
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
		out.Scores = append(out.Scores, s.scoreOut(sc))
	}
	return nil, out, nil
}

// scoreOut is sc as the tools return it: ids as hex, the comment
// redacted.
func (s *Server) scoreOut(sc store.Score) Score {
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
	return v
}

// AddScoreInput is add_score's arguments: a trace (or a span of it) or a
// session, and a value: a number, true or false, or a category.
type AddScoreInput struct {
	TraceID  string `json:"trace_id,omitempty" jsonschema:"the trace to score: its id or a unique prefix of at least 4 hex digits"`
	SpanID   string `json:"span_id,omitempty" jsonschema:"score this span of the trace (its full id, 16 hex digits) instead of the whole trace"`
	Session  string `json:"session,omitempty" jsonschema:"score this session (the runs of one conversation) instead of a trace"`
	Name     string `json:"name" jsonschema:"the score's name: thumbs, helpfulness, resolved..."`
	Value    any    `json:"value,omitempty" jsonschema:"a number (a numeric score) or true or false (a boolean score); leave it out and give category for a categorical score"`
	Category string `json:"category,omitempty" jsonschema:"the category of a categorical score, instead of value"`
	Comment  string `json:"comment,omitempty" jsonschema:"why: what was right or wrong"`
}

// AddScoreOutput is add_score's result: the score as stored.
type AddScoreOutput struct {
	Score Score `json:"score"`
}

func (s *Server) addScoreTool() {
	mcp.AddTool(s.mcp, &mcp.Tool{
		Name:        "add_score",
		Description: "Score a stored trace, a span of it, or a session: a number, true or false (thumbs), or a category, with a comment saying why. The score is stored with source api and, when the server knows it, the name of the API key that called; list_scores and the search language (score:NAME>=0.8) see it. A name with a score config (or earlier scores) keeps its kind and bounds.",
		InputSchema: schemaFor[AddScoreInput](func(p map[string]*jsonschema.Schema) {
			p["trace_id"].Pattern = "^[0-9a-fA-F]{4,32}$"
			p["span_id"].Pattern = "^[0-9a-fA-F]{16}$"
			p["session"].MaxLength = ptr(store.MaxSessionBytes)
			p["name"].MinLength = ptr(1)
			p["name"].MaxLength = ptr(store.MaxScoreNameBytes)
			p["value"].Types = []string{"number", "boolean"}
			p["category"].MaxLength = ptr(store.MaxScoreCategoryBytes)
			p["comment"].MaxLength = ptr(store.MaxScoreCommentBytes)
		}),
		Annotations: &mcp.ToolAnnotations{Title: "Add score", DestructiveHint: ptr(false)},
	}, safe(s.log, s.addScore))
}

func (s *Server) addScore(ctx context.Context, req *mcp.CallToolRequest, in AddScoreInput) (*mcp.CallToolResult, AddScoreOutput, error) {
	if _, ok := s.o.Store.(store.Scorer); !ok {
		return nil, AddScoreOutput{}, toolError("this store does not keep scores")
	}
	sc := store.Score{Name: in.Name, Session: in.Session, Comment: in.Comment, Source: store.SourceAPI, Author: author(req)}
	switch v := in.Value.(type) {
	case nil:
		if in.Category == "" {
			return nil, AddScoreOutput{}, toolError("give value (a number, or true or false) or category")
		}
		sc.Category = in.Category
	case bool:
		sc.Kind = store.ScoreBoolean
		if v {
			sc.Value = 1
		}
	case float64:
		sc.Value = v
	default:
		return nil, AddScoreOutput{}, toolError("value is a %T: give a number, or true or false", v)
	}
	if in.Value != nil && in.Category != "" {
		return nil, AddScoreOutput{}, toolError("give value or category, not both: a score is a number, true or false, or a category")
	}
	switch {
	case in.TraceID != "" && in.Session != "":
		return nil, AddScoreOutput{}, toolError("give trace_id or session, not both: a score belongs to one of them")
	case in.SpanID != "" && in.TraceID == "":
		return nil, AddScoreOutput{}, toolError("span_id needs the trace_id of its trace")
	case in.TraceID != "":
		id, err := store.Resolve(ctx, s.st, in.TraceID)
		if err != nil {
			if errors.Is(err, store.ErrNotFound) {
				return nil, AddScoreOutput{}, notFound(in.TraceID)
			}
			return nil, AddScoreOutput{}, s.storeError(ctx, "finding trace "+clip(in.TraceID), err)
		}
		// A full id resolves without the store: make sure it holds it.
		page, err := s.st.List(ctx, store.ListQuery{Filter: store.Filter{IDs: []trace.TraceID{id}}, Limit: 1})
		if err != nil {
			return nil, AddScoreOutput{}, s.storeError(ctx, "finding trace "+id.String(), err)
		}
		if len(page.Traces) == 0 {
			return nil, AddScoreOutput{}, notFound(id.String())
		}
		sc.TraceID = id
		if in.SpanID != "" {
			sid, err := trace.ParseSpanID(strings.ToLower(in.SpanID))
			if err != nil || sid.IsZero() {
				return nil, AddScoreOutput{}, toolError("span_id %q is not a span id: give its full id, 16 hex digits (get_execution_trace shows them)", clip(in.SpanID))
			}
			sc.SpanID = sid
		}
	case in.Session == "":
		return nil, AddScoreOutput{}, toolError("give the trace_id of a trace or a session to score")
	}
	got, err := store.AddScores(ctx, s.o.Store, []store.Score{sc})
	if err != nil {
		var se *store.ScoreError
		if errors.As(err, &se) {
			return nil, AddScoreOutput{}, toolError("%s: %v", se.Field, se.Err)
		}
		return nil, AddScoreOutput{}, s.storeError(ctx, "adding the score", failure(err))
	}
	if len(got) != 1 {
		return nil, AddScoreOutput{}, s.storeError(ctx, "adding the score", failure(fmt.Errorf("the store added %d scores, not 1", len(got))))
	}
	return nil, AddScoreOutput{Score: s.scoreOut(got[0])}, nil
}

// author is who gives a score through req: the name of the API key the
// HTTP transport authenticated (package server puts it in the token
// info's Extra under "key_name"), else the name the MCP client gave when
// it connected (over stdio, or a collector without keys), else "".
func author(req *mcp.CallToolRequest) string {
	if req == nil {
		return ""
	}
	if ex := req.GetExtra(); ex != nil && ex.TokenInfo != nil {
		if name, ok := ex.TokenInfo.Extra[keyNameExtra].(string); ok && name != "" {
			return trace.TruncateUTF8(name, store.MaxScoreAuthorBytes)
		}
	}
	if req.Session != nil {
		if p := req.Session.InitializeParams(); p != nil && p.ClientInfo != nil {
			return trace.TruncateUTF8(strings.ReplaceAll(p.ClientInfo.Name, "\x00", ""), store.MaxScoreAuthorBytes)
		}
	}
	return ""
}
