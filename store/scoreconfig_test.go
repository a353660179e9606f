package store_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/store/sqlite"
	"github.com/loupe-dev/loupe/trace"
)

func ptr(f float64) *float64 { return &f }

func TestScoreConfigValidate(t *testing.T) {
	for _, tt := range []struct {
		c     store.ScoreConfig
		field string
	}{
		{store.ScoreConfig{Name: "helpfulness", Kind: store.ScoreNumeric, Min: ptr(0), Max: ptr(1), Description: "how much it helped"}, ""},
		{store.ScoreConfig{Name: "label", Kind: store.ScoreCategorical, Categories: []string{"good", "bad"}}, ""},
		{store.ScoreConfig{Name: "thumbs", Kind: store.ScoreBoolean}, ""},
		{store.ScoreConfig{Name: "bad name", Kind: store.ScoreBoolean}, "name"},
		{store.ScoreConfig{Name: "x", Kind: "stars"}, "kind"},
		{store.ScoreConfig{Name: "x", Kind: store.ScoreBoolean, Min: ptr(0)}, "min"},
		{store.ScoreConfig{Name: "x", Kind: store.ScoreNumeric, Min: ptr(2), Max: ptr(1)}, "max"},
		{store.ScoreConfig{Name: "x", Kind: store.ScoreNumeric, Max: ptr(1e300)}, "max"},
		{store.ScoreConfig{Name: "x", Kind: store.ScoreNumeric, Categories: []string{"a"}}, "categories"},
		{store.ScoreConfig{Name: "x", Kind: store.ScoreCategorical, Categories: []string{"a", "a"}}, "categories"},
		{store.ScoreConfig{Name: "x", Kind: store.ScoreCategorical, Categories: []string{""}}, "categories"},
		{store.ScoreConfig{Name: "x", Kind: store.ScoreBoolean, Description: strings.Repeat("d", store.MaxScoreDescriptionBytes+1)}, "description"},
	} {
		err := tt.c.Validate()
		var ce *store.ScoreConfigError
		if tt.field == "" && err != nil || tt.field != "" && (!errors.As(err, &ce) || ce.Field != tt.field) {
			t.Errorf("%+v: %v, want field %q", tt.c, err, tt.field)
		}
	}
}

// TestAddScoresConfigured checks store.AddScores against a real store:
// configs fill in the kind and bound the values, and the kinds of stored
// scores fill in the rest.
func TestAddScoresConfigured(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "loupe.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, c := range []store.ScoreConfig{
		{Name: "helpfulness", Kind: store.ScoreNumeric, Min: ptr(0), Max: ptr(1)},
		{Name: "label", Kind: store.ScoreCategorical, Categories: []string{"good", "bad"}},
	} {
		if err := store.PutScoreConfig(ctx, st, c); err != nil {
			t.Fatal(err)
		}
	}
	cs, err := store.ScoreConfigs(ctx, st)
	if err != nil || len(cs) != 2 || cs[0].Name != "helpfulness" || *cs[0].Max != 1 || cs[1].Categories[1] != "bad" {
		t.Fatalf("ScoreConfigs = %+v, %v", cs, err)
	}
	id := trace.NewTraceID()
	got, err := store.AddScores(ctx, st, []store.Score{
		{TraceID: id, Name: "helpfulness", Value: 0.5, Source: store.SourceAPI},
		{TraceID: id, Name: "label", Category: "good", Source: store.SourceAPI},
		{TraceID: id, Name: "thumbs", Kind: store.ScoreBoolean, Value: 1, Source: store.SourceAPI},
	})
	if err != nil || len(got) != 3 || got[0].Kind != store.ScoreNumeric || got[1].Kind != store.ScoreCategorical {
		t.Fatalf("AddScores = %+v, %v", got, err)
	}
	// thumbs has no config, but a stored kind now.
	if got, err := store.AddScores(ctx, st, []store.Score{{TraceID: id, Name: "thumbs", Source: store.SourceAPI}}); err != nil || got[0].Kind != store.ScoreBoolean {
		t.Errorf("a kind from stored scores: %+v, %v", got, err)
	}
	for _, tt := range []struct {
		s     store.Score
		field string
	}{
		{store.Score{TraceID: id, Name: "helpfulness", Value: 1.5, Source: store.SourceAPI}, "value"},
		{store.Score{TraceID: id, Name: "helpfulness", Kind: store.ScoreBoolean, Value: 1, Source: store.SourceAPI}, "kind"},
		{store.Score{TraceID: id, Name: "label", Category: "meh", Source: store.SourceAPI}, "category"},
	} {
		_, err := store.AddScores(ctx, st, []store.Score{tt.s})
		var se *store.ScoreError
		if !errors.As(err, &se) || se.Field != tt.field {
			t.Errorf("%+v: %v, want a *store.ScoreError on %s", tt.s, err, tt.field)
		}
	}
	// A config may not contradict the scores stored.
	err = store.PutScoreConfig(ctx, st, store.ScoreConfig{Name: "thumbs", Kind: store.ScoreNumeric})
	if ce := (*store.ScoreConfigError)(nil); !errors.As(err, &ce) || ce.Field != "kind" {
		t.Errorf("a config of another kind than the stored scores: %v", err)
	}
	if ok, err := store.DeleteScoreConfig(ctx, st, "label"); !ok || err != nil {
		t.Errorf("DeleteScoreConfig = %v, %v", ok, err)
	}
}
