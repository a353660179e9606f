package storetest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/trace"
)

// CheckScores is the conformance suite of store.Scorer: newStore opens an
// empty store that implements it (as Run's newStore does). It checks
// adding and listing scores, first-write-wins ids (in a full batch too),
// the kind of a name
// under concurrent writers, validation, deletion with traces, the score:
// filter of lists and searches, and the statistics.
func CheckScores(t *testing.T, newStore func(t *testing.T) store.Store) {
	for _, tt := range []struct {
		name string
		fn   func(*testing.T, store.Scorer, store.Store)
	}{
		{"AddAndList", testScoresAddList},
		{"FirstWriteWins", testScoresFirstWrite},
		{"FullBatch", testScoresFullBatch},
		{"Invalid", testScoresInvalid},
		{"KindPerName", testScoresKind},
		{"ConcurrentKinds", testScoresConcurrentKinds},
		{"DeletedWithTrace", testScoresDeleted},
		{"Filter", testScoresFilter},
		{"Stats", testScoresStats},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := newStore(t)
			sc, ok := s.(store.Scorer)
			if !ok {
				t.Fatalf("%T does not implement store.Scorer", s)
			}
			tt.fn(t, sc, s)
		})
	}
}

func mustAddScores(t *testing.T, sc store.Scorer, scores ...store.Score) []store.Score {
	t.Helper()
	got, err := sc.AddScores(context.Background(), scores)
	if err != nil {
		t.Fatalf("AddScores: %v", err)
	}
	return got
}

func scoreIDs(scores []store.Score) []string {
	var ids []string
	for _, s := range scores {
		ids = append(ids, s.ID)
	}
	return ids
}

func listScores(t *testing.T, sc store.Scorer, f store.ScoreFilter) []store.Score {
	t.Helper()
	p, err := sc.Scores(context.Background(), f)
	if err != nil {
		t.Fatalf("Scores(%+v): %v", f, err)
	}
	return p.Scores
}

func testScoresAddList(t *testing.T, sc store.Scorer, s store.Store) {
	ctx := context.Background()
	recs := Gen(Spec{Start: t0})
	mustAppend(t, s, recs)
	id, span := recs[0].TraceID, recs[2].SpanID
	added := mustAddScores(t, sc,
		store.Score{TraceID: id, Name: "helpfulness", Kind: store.ScoreNumeric, Value: 0.25, Source: store.SourceHuman, Author: "ann", Comment: "vague", Time: t0},
		store.Score{TraceID: id, SpanID: span, Name: "thumbs", Kind: store.ScoreBoolean, Value: 1, Source: store.SourceAPI, Time: t0.Add(time.Minute)},
		store.Score{Session: "chat-7", Name: "label", Kind: store.ScoreCategorical, Category: "good", Source: store.SourceEval, Time: t0.Add(2 * time.Minute)},
		store.Score{TraceID: id, Name: "latency.ok", Kind: store.ScoreBoolean, Source: store.SourceOnline, Rule: "fast"}, // time: now
	)
	if len(added) != 4 {
		t.Fatalf("AddScores stored %d, want 4", len(added))
	}
	for _, a := range added {
		if len(a.ID) != 32 || a.Time.IsZero() {
			t.Errorf("stored score without id or time: %+v", a)
		}
	}
	if time.Since(added[3].Time) > time.Hour {
		t.Errorf("a score without a time got %v, want now", added[3].Time)
	}
	got := listScores(t, sc, store.ScoreFilter{TraceIDs: []trace.TraceID{id}})
	if want := []string{added[3].ID, added[1].ID, added[0].ID}; !slices.Equal(scoreIDs(got), want) {
		t.Fatalf("scores of the trace: %v, want %v newest first", scoreIDs(got), want)
	}
	if g := got[2]; g.Name != "helpfulness" || g.Value != 0.25 || g.Comment != "vague" || g.Author != "ann" || g.Source != store.SourceHuman || !g.Time.Equal(t0) || g.TraceID != id || !g.SpanID.IsZero() {
		t.Errorf("read back %+v", g)
	}
	if g := got[0]; g.Rule != "fast" || g.Kind != store.ScoreBoolean || g.Value != 0 {
		t.Errorf("read back %+v", g)
	}
	for _, tt := range []struct {
		f    store.ScoreFilter
		want []string
	}{
		{store.ScoreFilter{TraceIDs: []trace.TraceID{id}, SpanID: span}, []string{added[1].ID}},
		{store.ScoreFilter{Session: "chat-7"}, []string{added[2].ID}},
		{store.ScoreFilter{Name: "helpfulness"}, []string{added[0].ID}},
		{store.ScoreFilter{Source: store.SourceAPI}, []string{added[1].ID}},
		{store.ScoreFilter{Rule: "fast"}, []string{added[3].ID}},
		{store.ScoreFilter{Since: t0.Add(time.Minute), Until: t0.Add(3 * time.Minute)}, []string{added[2].ID, added[1].ID}},
		{store.ScoreFilter{TraceIDs: []trace.TraceID{trace.NewTraceID()}}, nil},
	} {
		if got := scoreIDs(listScores(t, sc, tt.f)); !slices.Equal(got, tt.want) {
			t.Errorf("Scores(%+v) = %v, want %v", tt.f, got, tt.want)
		}
	}
	// Pages of one, newest first, ending with an empty Next.
	var all []string
	f := store.ScoreFilter{Limit: 1}
	for range 10 {
		p, err := sc.Scores(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, scoreIDs(p.Scores)...)
		if p.Next == "" {
			break
		}
		f.Cursor = p.Next
	}
	if want := []string{added[3].ID, added[2].ID, added[1].ID, added[0].ID}; !slices.Equal(all, want) {
		t.Errorf("paged: %v, want %v", all, want)
	}
	for _, bad := range []store.ScoreFilter{{Cursor: "nope"}, {Limit: store.MaxScoreLimit + 1}, {Limit: -1}, {SpanID: span}, {Name: "no spaces"}, {Source: "robot"}} {
		if _, err := sc.Scores(ctx, bad); !errors.As(err, new(*store.QueryError)) {
			t.Errorf("Scores(%+v): %v, want a *store.QueryError", bad, err)
		}
	}
	n, err := sc.DeleteScores(ctx, added[0].ID, added[0].ID, "00000000000000000000000000000000")
	if err != nil || n != 1 {
		t.Errorf("DeleteScores = %d, %v; want 1", n, err)
	}
	if got := listScores(t, sc, store.ScoreFilter{Name: "helpfulness"}); len(got) != 0 {
		t.Errorf("deleted score still listed: %+v", got)
	}
}

func testScoresFirstWrite(t *testing.T, sc store.Scorer, s store.Store) {
	id := trace.NewTraceID()
	const sid = "0123456789abcdef0123456789abcdef"
	first := store.Score{ID: sid, TraceID: id, Name: "q", Kind: store.ScoreNumeric, Value: 1, Source: store.SourceOnline}
	if got := mustAddScores(t, sc, first); len(got) != 1 || got[0].ID != sid {
		t.Fatalf("first add: %+v", got)
	}
	again := first
	again.Value = 2
	other := store.Score{TraceID: id, Name: "q", Kind: store.ScoreNumeric, Value: 3, Source: store.SourceOnline}
	got := mustAddScores(t, sc, again, other, again)
	if len(got) != 1 || got[0].Value != 3 {
		t.Fatalf("second add stored %+v, want only the new score", got)
	}
	stored := listScores(t, sc, store.ScoreFilter{Name: "q"})
	if len(stored) != 2 {
		t.Fatalf("%d scores stored, want 2", len(stored))
	}
	for _, x := range stored {
		if x.ID == sid && x.Value != 1 {
			t.Errorf("the second write of id %s replaced the first: value %v", sid, x.Value)
		}
	}
}

// testScoresFullBatch adds store.MaxScoreBatch scores of several names
// at once, a third of whose ids are stored already and some given twice:
// exactly the new ones are stored, each once with its first value, and
// returned in the order given.
func testScoresFullBatch(t *testing.T, sc store.Scorer, s store.Store) {
	id := trace.NewTraceID()
	sid := func(i int) string { return fmt.Sprintf("%032x", i) }
	names := []string{"r/score", "r/pass", "r/a", "r/b", "r/c", "r/d", "r/e"}
	score := func(i int, v float64) store.Score {
		kind := store.ScoreNumeric
		if i%len(names) == 1 {
			kind, v = store.ScoreBoolean, float64(i%2)
		}
		return store.Score{ID: sid(i), TraceID: id, Name: names[i%len(names)], Kind: kind, Value: v, Comment: fmt.Sprintf("score %d", i), Source: store.SourceOnline, Rule: "r"}
	}
	var old []store.Score
	for i := 0; i < store.MaxScoreBatch; i += 3 {
		old = append(old, score(i, 0.25))
	}
	if got := mustAddScores(t, sc, old...); len(got) != len(old) {
		t.Fatalf("first add stored %d of %d", len(got), len(old))
	}
	var batch, want []store.Score
	for i := store.MaxScoreBatch - 1; len(batch) < store.MaxScoreBatch; i-- {
		batch = append(batch, score(i, 0.75))
		if i%3 != 0 {
			want = append(want, batch[len(batch)-1])
		}
		if i%10 == 0 && len(batch) < store.MaxScoreBatch { // given twice: the first wins
			again := score(i, 0.5)
			batch = append(batch, again)
		}
	}
	got := mustAddScores(t, sc, batch...)
	if !slices.Equal(scoreIDs(got), scoreIDs(want)) {
		t.Fatalf("AddScores returned %d scores, want the %d new ones in the order given", len(got), len(want))
	}
	stored := map[string]store.Score{}
	f := store.ScoreFilter{TraceIDs: []trace.TraceID{id}, Limit: store.MaxScoreLimit}
	for {
		p, err := sc.Scores(context.Background(), f)
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range p.Scores {
			if _, dup := stored[x.ID]; dup {
				t.Fatalf("score %s listed twice", x.ID)
			}
			stored[x.ID] = x
		}
		if p.Next == "" {
			break
		}
		f.Cursor = p.Next
	}
	if n := len(old) + len(want); len(stored) != n {
		t.Fatalf("%d scores stored, want %d", len(stored), n)
	}
	for _, x := range old {
		if stored[x.ID].Value != x.Value || stored[x.ID].Comment != x.Comment {
			t.Errorf("score %s: %v %q, want the first write %v %q", x.ID, stored[x.ID].Value, stored[x.ID].Comment, x.Value, x.Comment)
		}
	}
	for _, x := range want {
		if stored[x.ID].Value != x.Value || stored[x.ID].Name != x.Name {
			t.Errorf("score %s: %s %v, want %s %v", x.ID, stored[x.ID].Name, stored[x.ID].Value, x.Name, x.Value)
		}
	}
}

func testScoresInvalid(t *testing.T, sc store.Scorer, s store.Store) {
	ctx := context.Background()
	id := trace.NewTraceID()
	good := store.Score{TraceID: id, Name: "ok", Kind: store.ScoreNumeric, Value: 1, Source: store.SourceAPI}
	for _, tt := range []struct {
		field string
		mod   func(*store.Score)
	}{
		{"trace_id", func(s *store.Score) { s.TraceID = trace.TraceID{} }},
		{"session", func(s *store.Score) { s.Session = "x" }},
		{"name", func(s *store.Score) { s.Name = "has space" }},
		{"name", func(s *store.Score) { s.Name = "" }},
		{"kind", func(s *store.Score) { s.Kind = "stars" }},
		{"value", func(s *store.Score) { s.Value = math.NaN() }},
		{"value", func(s *store.Score) { s.Value = math.Inf(1) }},
		{"value", func(s *store.Score) { s.Value = 2 * store.MaxScoreValue }},
		{"value", func(s *store.Score) { s.Kind = store.ScoreBoolean; s.Value = 0.5 }},
		{"category", func(s *store.Score) { s.Kind = store.ScoreCategorical; s.Value = 0 }},
		{"source", func(s *store.Score) { s.Source = "" }},
		{"comment", func(s *store.Score) { s.Comment = "a\x00b" }},
		{"id", func(s *store.Score) { s.ID = "ABC" }},
	} {
		bad := good
		tt.mod(&bad)
		bad.Name += ""
		_, err := sc.AddScores(ctx, []store.Score{good, bad})
		var se *store.ScoreError
		if !errors.As(err, &se) || se.Index != 1 || se.Field != tt.field {
			t.Errorf("%s: AddScores error %v, want a *store.ScoreError at 1, field %s", tt.field, err, tt.field)
		}
	}
	if got := listScores(t, sc, store.ScoreFilter{}); len(got) != 0 {
		t.Errorf("a refused batch stored %d scores", len(got))
	}
	if _, err := sc.AddScores(ctx, make([]store.Score, store.MaxScoreBatch+1)); err == nil {
		t.Error("a batch larger than MaxScoreBatch was accepted")
	}
}

func testScoresKind(t *testing.T, sc store.Scorer, s store.Store) {
	ctx := context.Background()
	id := trace.NewTraceID()
	mustAddScores(t, sc, store.Score{TraceID: id, Name: "q", Kind: store.ScoreNumeric, Value: 1, Source: store.SourceAPI})
	_, err := sc.AddScores(ctx, []store.Score{
		{TraceID: id, Name: "fine", Kind: store.ScoreNumeric, Value: 1, Source: store.SourceAPI},
		{TraceID: id, Name: "q", Kind: store.ScoreBoolean, Value: 1, Source: store.SourceAPI},
	})
	var se *store.ScoreError
	if !errors.As(err, &se) || se.Index != 1 || se.Field != "kind" {
		t.Fatalf("a second kind for a name: %v, want a *store.ScoreError at 1, field kind", err)
	}
	_, err = sc.AddScores(ctx, []store.Score{
		{TraceID: id, Name: "mixed", Kind: store.ScoreNumeric, Value: 1, Source: store.SourceAPI},
		{TraceID: id, Name: "mixed", Kind: store.ScoreCategorical, Category: "x", Source: store.SourceAPI},
	})
	if !errors.As(err, &se) || se.Index != 1 || se.Field != "kind" {
		t.Fatalf("two kinds for a name in a batch: %v", err)
	}
	if got := listScores(t, sc, store.ScoreFilter{}); len(got) != 1 {
		t.Errorf("%d scores stored, want 1 (refused batches store nothing)", len(got))
	}
	kinds, err := sc.ScoreKinds(ctx)
	if err != nil || len(kinds) != 1 || kinds["q"] != store.ScoreNumeric {
		t.Errorf("ScoreKinds = %v, %v; want q numeric only", kinds, err)
	}
}

// testScoresConcurrentKinds races writers that give one new name
// different kinds: one kind wins, and every stored score has it.
func testScoresConcurrentKinds(t *testing.T, sc store.Scorer, s store.Store) {
	ctx := context.Background()
	id := trace.NewTraceID()
	const writers = 8
	var wg sync.WaitGroup
	errs := make([]error, writers)
	for w := range writers {
		wg.Go(func() {
			for round := range 5 {
				name := fmt.Sprintf("race%d", round)
				s := store.Score{TraceID: id, Name: name, Kind: store.ScoreNumeric, Value: 0.5, Source: store.SourceAPI}
				if w%2 == 1 {
					s.Kind, s.Value = store.ScoreBoolean, 1
				}
				_, err := sc.AddScores(ctx, []store.Score{s, {TraceID: id, Name: "shared", Kind: store.ScoreNumeric, Value: float64(w), Source: store.SourceAPI}})
				if err != nil && !errors.As(err, new(*store.ScoreError)) {
					errs[w] = err
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatalf("a writer failed: %v", err)
		}
	}
	kinds, err := sc.ScoreKinds(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for round := range 5 {
		name := fmt.Sprintf("race%d", round)
		got := listScores(t, sc, store.ScoreFilter{Name: name, Limit: store.MaxScoreLimit})
		if len(got) != writers/2 {
			t.Errorf("%s: %d scores stored, want %d (the writers of the winning kind)", name, len(got), writers/2)
		}
		for _, x := range got {
			if x.Kind != kinds[name] {
				t.Errorf("%s: a %s score stored, but the name is %s", name, x.Kind, kinds[name])
			}
		}
	}
}

func testScoresDeleted(t *testing.T, sc store.Scorer, s store.Store) {
	ctx := context.Background()
	var ids []trace.TraceID
	for i := range 3 {
		recs := Gen(Spec{Start: t0.Add(time.Duration(i) * time.Minute)})
		mustAppend(t, s, recs)
		ids = append(ids, recs[0].TraceID)
		mustAddScores(t, sc, store.Score{TraceID: recs[0].TraceID, SpanID: recs[1].SpanID, Name: "q", Kind: store.ScoreNumeric, Value: float64(i), Source: store.SourceAPI})
	}
	mustAddScores(t, sc, store.Score{Session: "s1", Name: "q", Kind: store.ScoreNumeric, Value: 9, Source: store.SourceAPI})
	if n, err := s.Delete(ctx, ids[0]); err != nil || n != 1 {
		t.Fatalf("Delete = %d, %v", n, err)
	}
	if got := listScores(t, sc, store.ScoreFilter{TraceIDs: ids[:1]}); len(got) != 0 {
		t.Errorf("scores of a deleted trace remain: %+v", got)
	}
	if _, err := s.Prune(ctx, store.PrunePolicy{KeepNewest: 1}); err != nil {
		t.Fatal(err)
	}
	got := listScores(t, sc, store.ScoreFilter{})
	if len(got) != 2 || got[0].Value != 9 || got[1].TraceID != ids[2] {
		t.Errorf("after prune: %+v, want the session's score and the newest trace's", got)
	}
}

// testScoresFilter checks score: in lists and searches.
func testScoresFilter(t *testing.T, sc store.Scorer, s store.Store) {
	ctx := context.Background()
	var ids []trace.TraceID
	for i := range 4 {
		recs := Gen(Spec{Start: t0.Add(time.Duration(i) * time.Minute), ToolOut: "aardvark"})
		mustAppend(t, s, recs)
		ids = append(ids, recs[0].TraceID)
	}
	add := func(i int, name string, kind store.ScoreKind, v float64, cat string) {
		mustAddScores(t, sc, store.Score{TraceID: ids[i], Name: name, Kind: kind, Value: v, Category: cat, Source: store.SourceHuman})
	}
	add(0, "helpfulness", store.ScoreNumeric, 0.2, "")
	add(1, "helpfulness", store.ScoreNumeric, 0.9, "")
	add(2, "helpfulness", store.ScoreNumeric, 0.8, "")
	add(0, "thumbs", store.ScoreBoolean, 0, "")
	add(1, "thumbs", store.ScoreBoolean, 1, "")
	add(2, "label", store.ScoreCategorical, 0, "good")
	add(3, "label", store.ScoreCategorical, 0, "bad")
	add(3, "label", store.ScoreCategorical, 0, "1")
	for _, tt := range []struct {
		q    string
		want []int
	}{
		{"score:helpfulness<0.5", []int{0}},
		{"score:helpfulness>=0.8", []int{2, 1}},
		{"score:helpfulness>0.8", []int{1}},
		{"score:helpfulness<=0.8", []int{2, 0}},
		{"score:helpfulness!=0.2", []int{2, 1}},
		{"score:thumbs=false", []int{0}},
		{"score:thumbs=true", []int{1}},
		{"score:label=good", []int{2}},
		{"score:label!=good", []int{3}},
		{"score:label=1", []int{3}},
		{"score:helpfulness>=0.8 score:thumbs=true", []int{1}},
		{"score:nothing>0", nil},
	} {
		q, err := store.ParseQueryAt(tt.q, t0)
		if err != nil {
			t.Fatalf("%s: %v", tt.q, err)
		}
		var want []trace.TraceID
		for _, i := range tt.want {
			want = append(want, ids[i])
		}
		if got := listIDs(t, s, store.ListQuery{Filter: q.Filter}); !slices.Equal(got, want) {
			t.Errorf("List %s = %v, want %v", tt.q, got, want)
		}
	}
	q, err := store.ParseQueryAt("score:label=good aardvark", t0)
	if err != nil {
		t.Fatal(err)
	}
	page, err := s.Search(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range page.Hits {
		if h.TraceID != ids[2] {
			t.Errorf("search %s found trace %s", q, h.TraceID)
		}
	}
	if len(page.Hits) == 0 {
		t.Errorf("search %s found nothing", q)
	}
	bad := store.ListQuery{Filter: store.Filter{Scores: []store.ScoreCond{{Name: "x", Op: "~"}}}}
	if _, err := s.List(ctx, bad); !errors.As(err, new(*store.QueryError)) {
		t.Errorf("a bad operator: %v, want a *store.QueryError", err)
	}
}

func testScoresStats(t *testing.T, sc store.Scorer, s store.Store) {
	ctx := context.Background()
	id := trace.NewTraceID()
	day := 24 * time.Hour
	var batch []store.Score
	for i := range 10 {
		batch = append(batch, store.Score{TraceID: id, Name: "q", Kind: store.ScoreNumeric, Value: float64(i), Source: store.SourceAPI, Time: t0.Add(time.Duration(i%2) * day)})
	}
	batch = append(batch,
		store.Score{TraceID: id, Name: "thumbs", Kind: store.ScoreBoolean, Value: 1, Source: store.SourceHuman, Time: t0},
		store.Score{TraceID: id, Name: "thumbs", Kind: store.ScoreBoolean, Value: 1, Source: store.SourceHuman, Time: t0},
		store.Score{TraceID: id, Name: "thumbs", Kind: store.ScoreBoolean, Value: 0, Source: store.SourceHuman, Time: t0},
		store.Score{TraceID: id, Name: "thumbs", Kind: store.ScoreBoolean, Value: 0, Source: store.SourceHuman, Time: t0.Add(-day)}, // before since
		store.Score{Session: "s", Name: "label", Kind: store.ScoreCategorical, Category: "good", Source: store.SourceHuman, Time: t0},
		store.Score{Session: "s", Name: "label", Kind: store.ScoreCategorical, Category: "good", Source: store.SourceHuman, Time: t0},
		store.Score{Session: "s", Name: "label", Kind: store.ScoreCategorical, Category: "bad", Source: store.SourceHuman, Time: t0},
	)
	mustAddScores(t, sc, batch...)
	stats, err := sc.ScoreStats(ctx, store.ScoreStatsQuery{Since: t0, Until: t0.Add(2 * day), Bucket: day})
	if err != nil {
		t.Fatal(err)
	}
	if len(stats) != 3 || stats[0].Name != "label" || stats[1].Name != "q" || stats[2].Name != "thumbs" {
		t.Fatalf("stats: %+v", stats)
	}
	label, q, thumbs := stats[0], stats[1], stats[2]
	if label.Count != 3 || label.Kind != store.ScoreCategorical || label.Categories["good"] != 2 || label.Categories["bad"] != 1 {
		t.Errorf("label: %+v", label)
	}
	if q.Count != 10 || q.Mean != 4.5 || q.Min != 0 || q.Max != 9 || !slices.Equal(q.Histogram, []int64{1, 1, 1, 1, 1, 1, 1, 1, 1, 1}) {
		t.Errorf("q: %+v", q)
	}
	// Even values on day 0 (0 2 4 6 8: mean 4), odd on day 1 (mean 5).
	if want := []store.ScoreBucket{{Start: t0, Count: 5, Mean: 4}, {Start: t0.Add(day), Count: 5, Mean: 5}}; len(q.Trend) != 2 ||
		!q.Trend[0].Start.Equal(want[0].Start) || q.Trend[0].Count != 5 || q.Trend[0].Mean != 4 || !q.Trend[1].Start.Equal(want[1].Start) || q.Trend[1].Mean != 5 {
		t.Errorf("q trend: %+v, want %+v", q.Trend, want)
	}
	if thumbs.Count != 3 || math.Abs(thumbs.Mean-2.0/3) > 1e-9 || thumbs.Categories["true"] != 2 || thumbs.Categories["false"] != 1 {
		t.Errorf("thumbs: %+v", thumbs)
	}
	one, err := sc.ScoreStats(ctx, store.ScoreStatsQuery{Name: "thumbs"})
	if err != nil || len(one) != 1 || one[0].Count != 4 || one[0].Trend != nil {
		t.Errorf("stats of thumbs, all time: %+v, %v", one, err)
	}
	for _, bad := range []store.ScoreStatsQuery{{Bucket: day}, {Since: t0, Until: t0.Add(2000 * time.Hour), Bucket: time.Hour}, {Name: "a b"}, {Bucket: -1}} {
		if _, err := sc.ScoreStats(ctx, bad); !errors.As(err, new(*store.QueryError)) {
			t.Errorf("ScoreStats(%+v): %v, want a *store.QueryError", bad, err)
		}
	}
}

// CheckScoresMigration checks the migration that adds scores on a
// populated store: open makes a store at the current schema, downgrade
// (given a store opened by open and closed) turns it back into the
// schema before scores (dropping the scores tables and lowering the
// version), and open again must upgrade it with the traces intact and
// scores working.
func CheckScoresMigration(t *testing.T, open func(t *testing.T) store.Store, downgrade func(t *testing.T)) {
	ctx := context.Background()
	s := open(t)
	var ids []trace.TraceID
	for i := range 3 {
		recs := Gen(Spec{Start: t0.Add(time.Duration(i) * time.Minute), ToolOut: "pangolin"})
		mustAppend(t, s, recs)
		ids = append(ids, recs[0].TraceID)
	}
	s.Close()
	downgrade(t)
	s = open(t)
	if got := listIDs(t, s, store.ListQuery{}); len(got) != 3 {
		t.Fatalf("after the migration %d traces, want 3", len(got))
	}
	if got := hitKeys(t, s, store.Query{Words: []string{"pangolin"}}); len(got) != 6 {
		t.Errorf("after the migration the text search finds %d records, want 6", len(got))
	}
	sc, ok := s.(store.Scorer)
	if !ok {
		t.Fatalf("%T does not implement store.Scorer", s)
	}
	mustAddScores(t, sc, store.Score{TraceID: ids[1], Name: "thumbs", Kind: store.ScoreBoolean, Value: 1, Source: store.SourceHuman})
	q, err := store.ParseQuery("score:thumbs=true")
	if err != nil {
		t.Fatal(err)
	}
	if got := listIDs(t, s, store.ListQuery{Filter: q.Filter}); !slices.Equal(got, ids[1:2]) {
		t.Errorf("score:thumbs=true lists %v, want %v", got, ids[1:2])
	}
	if _, err := s.Delete(ctx, ids[1]); err != nil {
		t.Fatal(err)
	}
	if got := listScores(t, sc, store.ScoreFilter{}); len(got) != 0 {
		t.Errorf("scores of a deleted trace remain after the migration: %+v", got)
	}
}

// Downgrade returns the statements that take a store of the newest
// schema back to the version before migrations[from]: they drop every
// table that migration and the later ones create (CREATE TABLE name) and
// set the schema version to from. It serves the migration checks of
// tables added by one migration (scores, datasets), whatever migrations
// come after it. It fails t if migrations[from] does not hold marker.
func Downgrade(t *testing.T, migrations []string, from int, marker string) []string {
	t.Helper()
	if from >= len(migrations) || !strings.Contains(migrations[from], marker) {
		t.Fatalf("migration %d does not hold %q any more; find the migration that does", from+1, marker)
	}
	var qs []string
	for i := len(migrations) - 1; i >= from; i-- {
		m := migrations[i]
		for {
			j := strings.Index(m, "CREATE TABLE ")
			if j < 0 {
				break
			}
			m = m[j+len("CREATE TABLE "):]
			name := strings.FieldsFunc(m, func(r rune) bool { return r == ' ' || r == '(' || r == '\n' || r == '\t' })[0]
			if name == "IF" { // CREATE TABLE IF NOT EXISTS name
				continue
			}
			qs = append(qs, "DROP TABLE IF EXISTS "+name)
		}
	}
	return append(qs, fmt.Sprintf("UPDATE meta SET value = '%d' WHERE key = 'schema_version'", from))
}
