package postgres

import (
	"context"

	"github.com/loupe-dev/loupe/store"
)

// The store.Datasets methods, on the tables of migration 8.

// PutDatasetVersion implements store.Datasets.
func (s *Store) PutDatasetVersion(ctx context.Context, base int, v store.DatasetVersion) (store.DatasetVersion, error) {
	return s.db.PutDatasetVersion(ctx, base, v)
}

// DatasetVersion implements store.Datasets.
func (s *Store) DatasetVersion(ctx context.Context, name string, version int) (store.DatasetVersion, error) {
	return s.db.DatasetVersion(ctx, name, version)
}

// DatasetVersions implements store.Datasets.
func (s *Store) DatasetVersions(ctx context.Context, name string) ([]store.DatasetVersion, error) {
	return s.db.DatasetVersions(ctx, name)
}

// ListDatasets implements store.Datasets.
func (s *Store) ListDatasets(ctx context.Context) ([]store.DatasetVersion, error) {
	return s.db.ListDatasets(ctx)
}

// DeleteDataset implements store.Datasets.
func (s *Store) DeleteDataset(ctx context.Context, name string) (bool, error) {
	return s.db.DeleteDataset(ctx, name)
}

// PutExperiment implements store.Datasets.
func (s *Store) PutExperiment(ctx context.Context, e store.Experiment) error {
	return s.db.PutExperiment(ctx, e)
}

// Experiment implements store.Datasets.
func (s *Store) Experiment(ctx context.Context, name string) (store.Experiment, error) {
	return s.db.Experiment(ctx, name)
}

// ListExperiments implements store.Datasets.
func (s *Store) ListExperiments(ctx context.Context, dataset string) ([]store.Experiment, error) {
	return s.db.ListExperiments(ctx, dataset)
}

// DeleteExperiment implements store.Datasets.
func (s *Store) DeleteExperiment(ctx context.Context, name string) (bool, error) {
	return s.db.DeleteExperiment(ctx, name)
}

var _ store.Datasets = (*Store)(nil)
