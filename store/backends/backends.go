// Package backends registers every store backend with package store, so
// that store.Open can open any DSN. Import it for its side effect:
//
//	import _ "github.com/loupe-dev/loupe/store/backends"
//
// The registry lives in package store and the backends import it, which
// keeps imports pointing down; this package is the one place that pulls in
// all of them (and their drivers).
package backends

import (
	_ "github.com/loupe-dev/loupe/store/postgres" // postgres:// and postgresql:// URLs
	_ "github.com/loupe-dev/loupe/store/sqlite"   // everything else: a file path
)
