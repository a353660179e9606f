package store

import (
	"context"

	"github.com/loupe-dev/loupe/trace"
)

// A GroupAppender is a Store that can append several groups of records
// in one transaction and say how many of each group were new: what a
// collector needs to commit concurrent requests together (group commit)
// and still answer each with its own count. Stores that implement it
// must make AppendGroups(ctx, g) equivalent to appending the groups one
// after another with Append, in one transaction: all or nothing, a
// record that an earlier group (or the store) already holds is not new
// in a later one.
type GroupAppender interface {
	Store
	// AppendGroups validates and appends every group in one transaction
	// and returns, for each group in order, how many of its records were
	// new. On error nothing is stored; a *RecordError's Index counts
	// records across the groups, in order.
	AppendGroups(ctx context.Context, groups [][]trace.Record) ([]int, error)
}
