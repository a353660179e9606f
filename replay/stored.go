package replay

import (
	"context"
	"fmt"
	"time"

	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/trace"
)

// LoadStored loads the recording of the stored trace whose id is, or
// starts with, id (at least 4 hex digits), as Load does.
func LoadStored(ctx context.Context, st store.Store, id string) (*Recording, error) {
	recs, err := storedRecords(ctx, st, id)
	if err != nil {
		return nil, err
	}
	return Load(recs)
}

// storedRecords returns the records of the stored trace whose id is, or
// starts with, id.
func storedRecords(ctx context.Context, st store.Store, id string) ([]trace.Record, error) {
	tid, err := store.Resolve(ctx, st, id)
	if err != nil {
		return nil, err
	}
	t, err := st.Trace(ctx, tid)
	if err != nil {
		return nil, err
	}
	return t.Records, nil
}

// RunStored replays the stored trace id (see LoadStored and Run). A
// branched run (FromStep set) is recorded into st, tagged with the
// original's id; o.Tracer, if set, is ignored then. A plain replay is a
// check and records nothing.
func RunStored(ctx context.Context, st store.Store, id string, o RunOptions) (*Report, error) {
	rec, err := LoadStored(ctx, st, id)
	if err != nil {
		return nil, err
	}
	if o.FromStep == 0 {
		return Run(ctx, rec, o)
	}
	if n := rec.Steps(); o.FromStep > n {
		return nil, fmt.Errorf("from step %d: the recorded run has %d steps; branch from a step between 1 and %d", o.FromStep, n, n)
	}
	// Block: the new run is short, and every record of it should be stored.
	o.Tracer = trace.New(trace.Options{Sinks: []trace.Sink{store.NewSink(st)},
		Dispatch: trace.DispatchOptions{OnFull: trace.Block, BatchSize: store.SinkBatchSize, QueueSize: 2 * store.SinkBatchSize}})
	rep, err := Run(ctx, rec, o)
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if serr := o.Tracer.Shutdown(sctx); serr != nil && err == nil {
		err = fmt.Errorf("storing the new run: %w", serr)
	}
	return rep, err
}
