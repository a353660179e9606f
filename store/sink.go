package store

import (
	"context"

	"github.com/loupe-dev/loupe/trace"
)

// SinkBatchSize is the dispatcher batch size recommended for a Sink
// (trace.DispatchOptions.BatchSize). Each batch is one Append, so one
// transaction: batches larger than the dispatcher's default ingest faster,
// because commits and summary upserts are paid per batch (BENCHMARKS.md
// has the measurements). Batching happens in the
// dispatcher's queue, in front of acknowledgement: a record is durable
// once the WriteRecords call carrying it returns.
const SinkBatchSize = 4096

// Sink is a trace.Sink that appends each batch it receives to a Store with
// one Append call, so a run records straight into the store through a
// trace.Dispatcher (use BatchSize SinkBatchSize). It buffers nothing: when
// WriteRecords returns nil the batch is committed. It does not close the
// Store: the caller that opened the store closes it after shutting the
// dispatcher down.
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
