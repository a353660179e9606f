package store

import (
	"context"
	"errors"
	"fmt"

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

// WriteRecords appends recs to the store in one batch. It honours ctx:
// once ctx is done it appends nothing, and the backends roll back a batch
// whose ctx ends before it commits; either way the error wraps ctx's
// error, and none of the batch is stored.
func (k *Sink) WriteRecords(ctx context.Context, recs []trace.Record) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("store sink: %d records not appended: %w", len(recs), err)
	}
	_, err := k.Store.Append(ctx, recs)
	if err != nil {
		if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
			// The backend's error may not say that ctx ended.
			return fmt.Errorf("store sink: %w (%w)", err, cerr)
		}
		return err
	}
	return nil
}

var _ trace.Sink = (*Sink)(nil)
