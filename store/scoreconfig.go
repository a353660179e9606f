package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
)

// A ScoreConfig describes a score name, so that people and programs know
// what to give: its kind, the range of a numeric score, the categories of
// a categorical one, and what it means. Configs are kept in the store's
// Settings under ScoreConfigPrefix, so every process sharing the store
// sees them. A score of a configured name must fit its config (see
// AddScores); names without a config take any value of their kind.
type ScoreConfig struct {
	Name string    `json:"name"`
	Kind ScoreKind `json:"kind"`
	// Min and Max bound a numeric score's value, inclusive; nil is no
	// bound.
	Min *float64 `json:"min,omitempty"`
	Max *float64 `json:"max,omitempty"`
	// Categories are a categorical score's labels, in the order offered;
	// empty allows any label.
	Categories  []string `json:"categories,omitempty"`
	Description string   `json:"description,omitempty"`
}

// ScoreConfigPrefix is the settings namespace of score configs.
const ScoreConfigPrefix = "scoreconfig:"

// Limits of a ScoreConfig.
const (
	MaxScoreCategories       = 100
	MaxScoreDescriptionBytes = 4 << 10
)

// A ScoreConfigError rejects a score config; Field names the JSON field at
// fault.
type ScoreConfigError struct {
	Field string
	Err   error
}

// Error says what is wrong.
func (e *ScoreConfigError) Error() string { return "score config: " + e.Err.Error() }

// Unwrap returns the reason.
func (e *ScoreConfigError) Unwrap() error { return e.Err }

// Validate checks c: a valid name and kind; Min and Max only on a numeric
// score, finite within ±MaxScoreValue and Min ≤ Max; categories only on a
// categorical score, at most MaxScoreCategories distinct labels of valid
// text; a description of at most MaxScoreDescriptionBytes. The error is a
// *ScoreConfigError.
func (c *ScoreConfig) Validate() error {
	bad := func(field, format string, args ...any) error {
		return &ScoreConfigError{Field: field, Err: fmt.Errorf(format, args...)}
	}
	if err := checkScoreName(c.Name); err != nil {
		return &ScoreConfigError{Field: "name", Err: err}
	}
	switch c.Kind {
	case ScoreNumeric, ScoreBoolean, ScoreCategorical:
	default:
		return bad("kind", "kind %q is not one of numeric, boolean, categorical", c.Kind)
	}
	for _, b := range []struct {
		field string
		v     *float64
	}{{"min", c.Min}, {"max", c.Max}} {
		if b.v == nil {
			continue
		}
		if c.Kind != ScoreNumeric {
			return bad(b.field, "%s is set on a %s score; only numeric scores have a range", b.field, c.Kind)
		}
		if !(math.Abs(*b.v) <= MaxScoreValue) {
			return bad(b.field, "%s %v is not a number from -%g to %g", b.field, *b.v, MaxScoreValue, MaxScoreValue)
		}
	}
	if c.Min != nil && c.Max != nil && *c.Min > *c.Max {
		return bad("max", "max %v is below min %v", *c.Max, *c.Min)
	}
	if len(c.Categories) > 0 && c.Kind != ScoreCategorical {
		return bad("categories", "categories are set on a %s score; only categorical scores have them", c.Kind)
	}
	if len(c.Categories) > MaxScoreCategories {
		return bad("categories", "%d categories are more than %d", len(c.Categories), MaxScoreCategories)
	}
	for i, cat := range c.Categories {
		if cat == "" || len(cat) > MaxScoreCategoryBytes || !isText(cat) {
			return bad("categories", "category %d is not text of 1 to %d bytes", i, MaxScoreCategoryBytes)
		}
		if slices.Contains(c.Categories[:i], cat) {
			return bad("categories", "category %q is given twice", cat)
		}
	}
	if len(c.Description) > MaxScoreDescriptionBytes || !isText(c.Description) {
		return bad("description", "description is not text of at most %d bytes", MaxScoreDescriptionBytes)
	}
	return nil
}

// Check reports why s does not fit c: another kind, a value outside the
// range, a category not among the categories. The error names the field
// as a score's JSON does (kind, value, category) and says what fits.
func (c *ScoreConfig) Check(s *Score) (field string, err error) {
	if s.Kind != c.Kind {
		return "kind", fmt.Errorf("score %s is configured as %s, not %s", c.Name, c.Kind, s.Kind)
	}
	switch {
	case c.Min != nil && s.Value < *c.Min, c.Max != nil && s.Value > *c.Max:
		return "value", fmt.Errorf("value %v of score %s is outside its configured range %s", s.Value, c.Name, c.rangeText())
	case len(c.Categories) > 0 && !slices.Contains(c.Categories, s.Category):
		return "category", fmt.Errorf("category %q of score %s is not one of its configured categories (%s)", s.Category, c.Name, strings.Join(c.Categories, ", "))
	}
	return "", nil
}

func (c *ScoreConfig) rangeText() string {
	lo, hi := "-∞", "∞"
	if c.Min != nil {
		lo = fmt.Sprint(*c.Min)
	}
	if c.Max != nil {
		hi = fmt.Sprint(*c.Max)
	}
	return "[" + lo + ", " + hi + "]"
}

// ScoreConfigs returns the score configs kept in st, sorted by name. A
// stored config that does not decode is an error naming it.
func ScoreConfigs(ctx context.Context, st Settings) ([]ScoreConfig, error) {
	m, err := st.Settings(ctx, ScoreConfigPrefix)
	if err != nil {
		return nil, err
	}
	out := []ScoreConfig{}
	for k, v := range m {
		var c ScoreConfig
		if err := json.Unmarshal([]byte(v), &c); err != nil {
			return nil, fmt.Errorf("stored score config %s does not decode: %v", k, err)
		}
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b ScoreConfig) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// PutScoreConfig validates c and keeps it in st, replacing the config of
// the same name. When st is a Scorer whose scores of the name already
// have another kind, it is refused (Field "kind").
func PutScoreConfig(ctx context.Context, st Settings, c ScoreConfig) error {
	if err := c.Validate(); err != nil {
		return err
	}
	if sc, ok := st.(Scorer); ok {
		kinds, err := sc.ScoreKinds(ctx)
		if err != nil {
			return err
		}
		if k, ok := kinds[c.Name]; ok && k != c.Kind {
			return &ScoreConfigError{Field: "kind", Err: fmt.Errorf("scores named %s in this store are %s, not %s", c.Name, k, c.Kind)}
		}
	}
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	return st.PutSetting(ctx, ScoreConfigPrefix+c.Name, string(b))
}

// DeleteScoreConfig removes the config of name and reports whether there
// was one. Scores of the name stay.
func DeleteScoreConfig(ctx context.Context, st Settings, name string) (bool, error) {
	return st.DeleteSetting(ctx, ScoreConfigPrefix+name)
}

// ErrNoScores is returned for a store that does not keep scores.
var ErrNoScores = errors.New("this store does not keep scores (it does not implement store.Scorer)")

// AddScores adds scores to st the way every handler does (the HTTP API,
// the CLI, loupe eval): a score without a kind takes its name's, from the
// name's config or from the scores stored under it, and a new name is
// categorical when the score has a category, else numeric; a score of a
// configured name must fit the config (ScoreConfig.Check); then
// Scorer.AddScores stores them. Errors about a score are *ScoreErrors.
// A store that is not a Scorer gives ErrNoScores.
func AddScores(ctx context.Context, st Store, scores []Score) ([]Score, error) {
	sc, ok := st.(Scorer)
	if !ok {
		return nil, ErrNoScores
	}
	configs := map[string]ScoreConfig{}
	if set, ok := st.(Settings); ok {
		cs, err := ScoreConfigs(ctx, set)
		if err != nil {
			return nil, err
		}
		for _, c := range cs {
			configs[c.Name] = c
		}
	}
	var kinds map[string]ScoreKind
	scores = slices.Clone(scores)
	for i := range scores {
		s := &scores[i]
		c, configured := configs[s.Name]
		if s.Kind == "" {
			switch {
			case configured:
				s.Kind = c.Kind
			default:
				if kinds == nil {
					var err error
					if kinds, err = sc.ScoreKinds(ctx); err != nil {
						return nil, err
					}
				}
				s.Kind = kinds[s.Name]
			}
			if s.Kind == "" && s.Category != "" {
				s.Kind = ScoreCategorical
			} else if s.Kind == "" {
				s.Kind = ScoreNumeric
			}
		}
		if configured {
			if field, err := c.Check(s); err != nil {
				return nil, &ScoreError{Index: i, Field: field, Err: err}
			}
		}
	}
	return sc.AddScores(ctx, scores)
}
