package store

import (
	"context"

	"github.com/loupe-dev/loupe/trace"
)

// A CommitWatcher is a Store that several processes may share and that
// tells each of them what the others commit: what lets the live streams of
// one collector show the records that senders posted to another collector
// of the same store. The PostgreSQL backend implements it with LISTEN and
// NOTIFY; SQLite, which one process owns, does not.
type CommitWatcher interface {
	Store

	// WatchCommits tells w of the records committed through other Store
	// values of the same store (other processes, or other Opens of the same
	// database in this one), until ctx ends or the Store is closed. It
	// returns once its first attempt to listen is over: nil if it listens,
	// otherwise why not; in both cases it goes on in the background, and
	// listens again (with backoff) whenever its connection is lost.
	//
	// Commit and Lost are called from one goroutine, one at a time (Error
	// from another). A notice
	// is sent only by a committed transaction, after its commit, so the
	// records it names can be read from the store when it arrives (unless
	// they were deleted since). A callback that is slow does not slow the
	// committing processes down: notices that arrive meanwhile are queued
	// up to a bound, beyond which they are dropped and w.Lost is called.
	WatchCommits(ctx context.Context, w CommitWatch) error
}

// CommitWatch receives what a CommitWatcher watches. Commit is required;
// Lost and Error may be nil.
type CommitWatch struct {
	// Commit is called with each notice of records another process
	// committed. The notice is the callee's.
	Commit func(CommitNotice)

	// Lost is called when notices may have been missed: the connection
	// the watcher listens on was lost and it listens again, or Commit
	// fell too far behind. Whatever the caller derives from notices should
	// be read again from the store.
	Lost func()

	// Error is told why listening failed, each time it fails, before the
	// watcher tries again.
	Error func(error)
}

// A CommitNotice names records one transaction of another process
// committed. A transaction's records may be told of in several notices.
type CommitNotice struct {
	Traces []CommitTrace
}

// CommitTrace names records of one trace: those whose seq is in one of
// Seqs. The ranges are in ascending order and do not overlap; a range may
// also cover seqs of records committed by other transactions, or of none
// (a notice is bounded in size, so a transaction's many scattered seqs are
// told as fewer, wider ranges).
type CommitTrace struct {
	TraceID trace.TraceID
	Seqs    []SeqRange
}

// SeqRange is the seqs from From to To, both included (From <= To).
type SeqRange struct {
	From, To uint64
}
