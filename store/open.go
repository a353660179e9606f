package store

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
)

// An Opener opens a store of one backend from a DSN.
type Opener func(ctx context.Context, dsn string) (Store, error)

var (
	regMu    sync.RWMutex
	backends = map[string]Opener{}
)

// Register makes a backend available to Open under name ("sqlite",
// "postgres"). Backends call it from init; registering a name twice panics.
func Register(name string, open Opener) {
	regMu.Lock()
	defer regMu.Unlock()
	if _, dup := backends[name]; dup {
		panic("store: backend " + name + " registered twice")
	}
	backends[name] = open
}

// Backends returns the registered backend names, sorted.
func Backends() []string {
	regMu.RLock()
	defer regMu.RUnlock()
	var names []string
	for n := range backends {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// BackendFor returns the backend name Open uses for dsn: "postgres" for
// postgres:// and postgresql:// URLs, "sqlite" for anything else (a file
// path, optionally with a file: prefix).
func BackendFor(dsn string) string {
	l := strings.ToLower(dsn)
	if strings.HasPrefix(l, "postgres://") || strings.HasPrefix(l, "postgresql://") {
		return "postgres"
	}
	return "sqlite"
}

// Open opens the store named by dsnOrPath with the backend BackendFor
// chooses, creating and migrating it as needed. An empty dsnOrPath means
// DefaultPath(). The backend must have been registered, usually by
// importing github.com/loupe-dev/loupe/store/backends.
func Open(ctx context.Context, dsnOrPath string) (Store, error) {
	if dsnOrPath == "" {
		dsnOrPath = DefaultPath()
	}
	name := BackendFor(dsnOrPath)
	regMu.RLock()
	open := backends[name]
	regMu.RUnlock()
	if open == nil {
		return nil, fmt.Errorf("store %s: this program was built without the %s backend (import github.com/loupe-dev/loupe/store/backends)", Redact(dsnOrPath), name)
	}
	return open(ctx, dsnOrPath)
}

// DefaultPath returns the default SQLite store:
// $XDG_DATA_HOME/loupe/loupe.db, or ~/.local/share/loupe/loupe.db when
// XDG_DATA_HOME is unset. The directory is not created here.
func DefaultPath() string {
	dir := os.Getenv("XDG_DATA_HOME")
	if dir == "" || !filepath.IsAbs(dir) {
		home, err := os.UserHomeDir()
		if err != nil {
			home = "."
		}
		dir = filepath.Join(home, ".local", "share")
	}
	return filepath.Join(dir, "loupe", "loupe.db")
}

// Redact returns dsn with any password replaced by "xxxxx", for messages.
func Redact(dsn string) string {
	if !strings.Contains(dsn, "://") {
		return dsn
	}
	u, err := url.Parse(dsn)
	if err != nil {
		return "(unparsable DSN)"
	}
	return u.Redacted()
}

// SchemaVersionError reports a store written by a newer Loupe. A backend
// that finds one opens the store read-only: queries work as far as the
// older schema allows, and every write returns this error.
type SchemaVersionError struct {
	Store string // the store's path or redacted DSN
	Found int    // the schema version in the store
	Known int    // the newest version this build knows
}

func (e *SchemaVersionError) Error() string {
	return fmt.Sprintf("store at %s has schema version %d, this loupe knows up to %d; upgrade loupe (the store is open read-only)", e.Store, e.Found, e.Known)
}
