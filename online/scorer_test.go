package online_test

import (
	"github.com/loupe-dev/loupe/store"
)

// scorerFor returns the store.Scorer the tests give the engine for st:
// the store's own (SQLite and PostgreSQL keep scores).
func scorerFor(st store.Store) store.Scorer {
	return st.(store.Scorer)
}

// reopened is the scorer of a store opened again on the same file after
// a restart: the store's own, which holds what the earlier one stored.
func reopened(_ store.Scorer, st store.Store) store.Scorer {
	return st.(store.Scorer)
}
