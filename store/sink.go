package store

import (
	"context"

	"github.com/loupe-dev/loupe/trace"
)

// Sink is a trace.Sink that appends each batch it receives to a Store with
// one Append call, so a run records straight into the store through a
// trace.Dispatcher. It does not close the Store: the caller that opened the
// store closes it after shutting the dispatcher down.
type Sink struct {
	Store Store
}

// NewSink returns a Sink writing to s.
func NewSink(s Store) *Sink { return &Sink{Store: s} }

// WriteRecords appends recs to the store in one batch.
func (k *Sink) WriteRecords(ctx context.Context, recs []trace.Record) error {
	_, err := k.Store.Append(ctx, recs)
	return err
}

var _ trace.Sink = (*Sink)(nil)
