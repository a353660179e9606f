package store

import (
	"context"

	"github.com/loupe-dev/loupe/trace"
)

// A GroupAppender is a Store that can append several groups of records
// in one transaction and say how many of each group were new: what a
// collector needs to commit concurrent requests together (group commit)
// and still answer each with its own count.
//
// Appending is split in two so that a store with one writer holds its
// write lock only for the inserts: PrepareGroup does, concurrently and
// before any lock, the work that needs no lock (validating, encoding the
// records), and AppendGroups writes prepared groups. Stores that
// implement it must make AppendGroups(ctx, g) equivalent to appending the
// groups' records one after another with Append, in one transaction: all
// or nothing, a record that an earlier group (or the store) already holds
// is not new in a later one.
type GroupAppender interface {
	Store
	// PrepareGroup validates recs (a *RecordError's Index counts from
	// the first of recs) and prepares them for AppendGroups. It stores
	// nothing and is safe to call concurrently with every other method.
	// The group refers to recs, which must not change until it is
	// appended or dropped.
	PrepareGroup(recs []trace.Record) (Group, error)
	// AppendGroups appends every group, each from this store's
	// PrepareGroup, in one transaction and returns, for each group in
	// order, how many of its records were new. On error nothing is
	// stored. A group may be appended again after an error.
	AppendGroups(ctx context.Context, groups []Group) ([]int, error)
}

// A Group is records prepared by a GroupAppender's PrepareGroup. Only
// the store that prepared it can append it.
type Group interface {
	// Records returns the group's records (not a copy).
	Records() []trace.Record
}
