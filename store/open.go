package store

import (
	"context"
	"errors"
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
	regMu      sync.RWMutex
	backends   = map[string]Opener{}
	roBackends = map[string]Opener{}
)

// ErrNoStore is wrapped by the error OpenReadOnly returns when no store
// exists at the path it was given; OpenReadOnly creates nothing.
var ErrNoStore = errors.New("no store exists there")

// Register makes a backend available to Open under name ("sqlite",
// "postgres"). Backends call it from init; registering a name twice panics.
func Register(name string, open Opener) { register(backends, "backend", name, open) }

// RegisterReadOnly makes OpenReadOnly use open for backend name. open
// must not create or change anything, and must fail with an error wrapping
// ErrNoStore when the store does not exist. A backend that registers none
// is opened by OpenReadOnly with its Register opener. Registering a name
// twice panics.
func RegisterReadOnly(name string, open Opener) {
	register(roBackends, "read-only backend", name, open)
}

// register adds v to the registry m under name, holding regMu; what
// names the registry in the panic when name is taken.
func register[T any](m map[string]T, what, name string, v T) {
	regMu.Lock()
	defer regMu.Unlock()
	if _, dup := m[name]; dup {
		panic("store: " + what + " " + name + " registered twice")
	}
	m[name] = v
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

// CheckDSN reports whether dsn names a store Open understands: a
// postgres:// or postgresql:// URL, or a SQLite file path (optionally with a
// file: prefix). Any other URL scheme (mysql://, sqlite://, http://) is an
// error that lists the supported forms, so that no file or folder is
// created under a name like "mysql:".
func CheckDSN(dsn string) error {
	scheme, _, ok := strings.Cut(dsn, "://")
	if !ok || BackendFor(dsn) == "postgres" {
		return nil
	}
	hint := ""
	if strings.EqualFold(scheme, "sqlite") || strings.EqualFold(scheme, "sqlite3") || strings.EqualFold(scheme, "file") {
		hint = "; for SQLite pass the file path itself, e.g. --db ./traces.db or --db file:./traces.db"
	}
	return fmt.Errorf("store %s: unknown scheme %q: supported are a SQLite file path (optionally file:PATH) and postgres:// or postgresql:// URLs%s",
		Redact(dsn), scheme, hint)
}

// Open opens the store named by dsnOrPath with the backend BackendFor
// chooses, creating and migrating it as needed. An empty dsnOrPath means
// DefaultPath(). A DSN with a scheme CheckDSN refuses is an error. The
// backend must have been registered, usually by importing
// github.com/loupe-dev/loupe/store/backends.
func Open(ctx context.Context, dsnOrPath string) (Store, error) {
	return open(ctx, dsnOrPath, false)
}

// OpenReadOnly opens an existing store for reading: it creates no file,
// folder or schema, and works on a store the caller may only read. When
// nothing exists at the path the error wraps ErrNoStore. Writes to the
// returned store fail with an error naming it.
func OpenReadOnly(ctx context.Context, dsnOrPath string) (Store, error) {
	return open(ctx, dsnOrPath, true)
}

func open(ctx context.Context, dsnOrPath string, readOnly bool) (Store, error) {
	if dsnOrPath == "" {
		dsnOrPath = DefaultPath()
	}
	if err := CheckDSN(dsnOrPath); err != nil {
		return nil, err
	}
	name := BackendFor(dsnOrPath)
	regMu.RLock()
	open := backends[name]
	if ro := roBackends[name]; readOnly && ro != nil {
		open = ro
	}
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

// Error says which store is too new and what to do.
func (e *SchemaVersionError) Error() string {
	return fmt.Sprintf("store at %s has schema version %d, this loupe knows up to %d; upgrade loupe (the store is open read-only)", e.Store, e.Found, e.Known)
}
