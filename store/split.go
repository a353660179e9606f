package store

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"time"

	"github.com/loupe-dev/loupe/trace"
)

// Split returns a Store that sends the queries over traces and scores to
// replica and everything else to primary: a collector whose web UI, API
// and MCP tools read from a read replica (OpenReadOnly on a hot standby)
// while it writes to the primary.
//
// To replica go Trace, List, Search, Export, Aggregate, Records
// (RecordPager), Sessions (SessionLister), WindowStats (WindowStater) and
// the score queries Scores, ScoreKinds and ScoreStats (Scorer): the reads
// that scan the traces, which a replica takes off the primary. They see
// the replica's data, up to its replication lag behind the primary.
//
// To primary go every write (Append, AppendGroups, Delete, Prune,
// AddScores, DeleteScores, the settings, datasets and alerts), and the
// reads that a write is checked against or that must see a write at
// once: Settings (API keys, web sessions, retention: a revoked key must
// stop working on every collector at once), the datasets and experiments
// (an editor's next version is based on what it read) and the alerts'
// firings (one open firing per monitor). They are small.
//
// The result implements Settings, Scorer, Datasets, Alerts, RecordPager,
// SessionLister, WindowStater and Configurable, and GroupAppender when
// primary does. Split returns an error when primary or replica does not
// implement an interface it forwards to that side: the PostgreSQL and
// SQLite backends implement them all. SetOptions goes to both; Close
// closes both. The result is safe for concurrent use as its two stores
// are.
func Split(primary, replica Store) (Store, error) {
	s := &split{Store: primary, replica: replica}
	var missing []error
	need := func(ok bool, side, name string, st Store) {
		if !ok {
			missing = append(missing, fmt.Errorf("the %s (%T) does not implement store.%s", side, st, name))
		}
	}
	var ok bool
	s.pSettings, ok = primary.(Settings)
	need(ok, "primary", "Settings", primary)
	s.pScorer, ok = primary.(Scorer)
	need(ok, "primary", "Scorer", primary)
	s.pDatasets, ok = primary.(Datasets)
	need(ok, "primary", "Datasets", primary)
	s.pAlerts, ok = primary.(Alerts)
	need(ok, "primary", "Alerts", primary)
	s.rScorer, ok = replica.(Scorer)
	need(ok, "replica", "Scorer", replica)
	s.rPager, ok = replica.(RecordPager)
	need(ok, "replica", "RecordPager", replica)
	s.rSessions, ok = replica.(SessionLister)
	need(ok, "replica", "SessionLister", replica)
	s.rWindow, ok = replica.(WindowStater)
	need(ok, "replica", "WindowStater", replica)
	if err := errors.Join(missing...); err != nil {
		return nil, fmt.Errorf("store.Split: %w", err)
	}
	if ga, ok := primary.(GroupAppender); ok {
		return &splitGroups{split: s, ga: ga}, nil
	}
	return s, nil
}

// Primary returns the store that st writes to: the primary of a store
// made by Split, st itself otherwise. Reads that must see a commit that
// was just announced, such as reading back the records a CommitNotice
// names, go to it, since a replica lags behind by up to its replication
// delay.
func Primary(st Store) Store {
	if s, ok := st.(interface{ primary() Store }); ok {
		return s.primary()
	}
	return st
}

func (s *split) primary() Store { return s.Store }

// split is Split's store; Store is the primary, whose methods it keeps
// unless it forwards them to replica below.
type split struct {
	Store
	replica Store

	pSettings Settings
	pScorer   Scorer
	pDatasets Datasets
	pAlerts   Alerts

	rScorer   Scorer
	rPager    RecordPager
	rSessions SessionLister
	rWindow   WindowStater
}

var (
	_ Settings      = (*split)(nil)
	_ Scorer        = (*split)(nil)
	_ Datasets      = (*split)(nil)
	_ Alerts        = (*split)(nil)
	_ RecordPager   = (*split)(nil)
	_ SessionLister = (*split)(nil)
	_ WindowStater  = (*split)(nil)
	_ Configurable  = (*split)(nil)
	_ CommitWatcher = (*split)(nil)
	_ GroupAppender = (*splitGroups)(nil)
)

// The reads that scan traces: the replica.

func (s *split) Trace(ctx context.Context, id trace.TraceID) (*Trace, error) {
	return s.replica.Trace(ctx, id)
}

func (s *split) List(ctx context.Context, q ListQuery) (ListPage, error) {
	return s.replica.List(ctx, q)
}

func (s *split) Search(ctx context.Context, q Query) (SearchPage, error) {
	return s.replica.Search(ctx, q)
}

func (s *split) Export(ctx context.Context, f Filter) iter.Seq2[trace.Record, error] {
	return s.replica.Export(ctx, f)
}

func (s *split) Aggregate(ctx context.Context, since, until time.Time) (Aggregates, error) {
	return s.replica.Aggregate(ctx, since, until)
}

func (s *split) Records(ctx context.Context, id trace.TraceID, r RecordRange) (RecordPage, error) {
	return s.rPager.Records(ctx, id, r)
}

func (s *split) Sessions(ctx context.Context, q SessionQuery) (SessionPage, error) {
	return s.rSessions.Sessions(ctx, q)
}

func (s *split) WindowStats(ctx context.Context, q WindowQuery) (WindowStats, error) {
	return s.rWindow.WindowStats(ctx, q)
}

func (s *split) Scores(ctx context.Context, f ScoreFilter) (ScorePage, error) {
	return s.rScorer.Scores(ctx, f)
}

func (s *split) ScoreKinds(ctx context.Context) (map[string]ScoreKind, error) {
	return s.rScorer.ScoreKinds(ctx)
}

func (s *split) ScoreStats(ctx context.Context, q ScoreStatsQuery) ([]ScoreStats, error) {
	return s.rScorer.ScoreStats(ctx, q)
}

// Writes, and the reads that must see them: the primary. Append, Delete
// and Prune are the embedded primary's.

func (s *split) AddScores(ctx context.Context, scores []Score) ([]Score, error) {
	return s.pScorer.AddScores(ctx, scores)
}

func (s *split) DeleteScores(ctx context.Context, ids ...string) (int, error) {
	return s.pScorer.DeleteScores(ctx, ids...)
}

func (s *split) Settings(ctx context.Context, prefix string) (map[string]string, error) {
	return s.pSettings.Settings(ctx, prefix)
}

func (s *split) PutSetting(ctx context.Context, key, value string) error {
	return s.pSettings.PutSetting(ctx, key, value)
}

func (s *split) DeleteSetting(ctx context.Context, key string) (bool, error) {
	return s.pSettings.DeleteSetting(ctx, key)
}

func (s *split) PutDatasetVersion(ctx context.Context, base int, v DatasetVersion) (DatasetVersion, error) {
	return s.pDatasets.PutDatasetVersion(ctx, base, v)
}

func (s *split) DatasetVersion(ctx context.Context, name string, version int) (DatasetVersion, error) {
	return s.pDatasets.DatasetVersion(ctx, name, version)
}

func (s *split) DatasetVersions(ctx context.Context, name string) ([]DatasetVersion, error) {
	return s.pDatasets.DatasetVersions(ctx, name)
}

func (s *split) ListDatasets(ctx context.Context) ([]DatasetVersion, error) {
	return s.pDatasets.ListDatasets(ctx)
}

func (s *split) DeleteDataset(ctx context.Context, name string) (bool, error) {
	return s.pDatasets.DeleteDataset(ctx, name)
}

func (s *split) PutExperiment(ctx context.Context, e Experiment) error {
	return s.pDatasets.PutExperiment(ctx, e)
}

func (s *split) Experiment(ctx context.Context, name string) (Experiment, error) {
	return s.pDatasets.Experiment(ctx, name)
}

func (s *split) ListExperiments(ctx context.Context, dataset string) ([]Experiment, error) {
	return s.pDatasets.ListExperiments(ctx, dataset)
}

func (s *split) DeleteExperiment(ctx context.Context, name string) (bool, error) {
	return s.pDatasets.DeleteExperiment(ctx, name)
}

func (s *split) OpenFiring(ctx context.Context, f Firing) (Firing, bool, error) {
	return s.pAlerts.OpenFiring(ctx, f)
}

func (s *split) ResolveFiring(ctx context.Context, id string, at time.Time, value float64) (bool, error) {
	return s.pAlerts.ResolveFiring(ctx, id, at, value)
}

func (s *split) AddDelivery(ctx context.Context, d Delivery) error {
	return s.pAlerts.AddDelivery(ctx, d)
}

func (s *split) Firings(ctx context.Context, f FiringFilter) ([]Firing, error) {
	return s.pAlerts.Firings(ctx, f)
}

// Both.

func (s *split) SetOptions(o Options) {
	for _, st := range []Store{s.Store, s.replica} {
		if c, ok := st.(Configurable); ok {
			c.SetOptions(o)
		}
	}
}

func (s *split) Close() error {
	return errors.Join(s.Store.Close(), s.replica.Close())
}

// splitGroups is a split whose primary is a GroupAppender.
type splitGroups struct {
	*split
	ga GroupAppender
}

func (s *splitGroups) PrepareGroup(recs []trace.Record) (Group, error) {
	return s.ga.PrepareGroup(recs)
}

func (s *splitGroups) AppendGroups(ctx context.Context, groups []Group) ([]int, error) {
	return s.ga.AppendGroups(ctx, groups)
}

// WatchCommits implements CommitWatcher with the primary's notices, which
// the primary sends as it commits. Read the records they name back from
// Primary: the replica may not have them yet. A primary that cannot tell
// its commits makes it return an error wrapping errors.ErrUnsupported.
func (s *split) WatchCommits(ctx context.Context, w CommitWatch) error {
	cw, ok := s.Store.(CommitWatcher)
	if !ok {
		return fmt.Errorf("store.Split: the primary (%T) cannot tell its commits: %w", s.Store, errors.ErrUnsupported)
	}
	return cw.WatchCommits(ctx, w)
}
