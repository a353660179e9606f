package store

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// DefaultProject is the project of a store's own DSN: the traces of a
// program that names no project.
const DefaultProject = "default"

var projectName = regexp.MustCompile(`^[a-z][a-z0-9_]{0,39}$`)

// CheckProject reports whether name can name a project: a lower-case
// letter, then up to 39 lower-case letters, digits or underscores. The
// limits keep a project's name usable as a file name and a PostgreSQL
// schema name without quoting.
func CheckProject(name string) error {
	if !projectName.MatchString(name) {
		return fmt.Errorf("project name %q: use a lower-case letter, then up to 39 lower-case letters, digits or underscores (e.g. team_a)", clipName(name))
	}
	return nil
}

func clipName(s string) string {
	if len(s) > 60 {
		return s[:60] + "…"
	}
	return s
}

// ProjectDSN returns the DSN of project's store beside the store at
// dsnOrPath (empty means DefaultPath()). Each project is a store of its
// own, so that nothing of one project can reach a query of another:
//
//   - DefaultProject is dsnOrPath itself;
//   - for SQLite, project P of DIR/NAME.db is DIR/NAME.projects/P.db;
//   - for PostgreSQL, project P lives in the schema S__P of the same
//     database, where S is the first schema of the DSN's search_path
//     ("public" when it names none); the backend creates the schema.
//
// An in-memory SQLite store has no place for projects and is an error.
func ProjectDSN(dsnOrPath, project string) (string, error) {
	if dsnOrPath == "" {
		dsnOrPath = DefaultPath()
	}
	if project == "" || project == DefaultProject {
		return dsnOrPath, nil
	}
	if err := CheckProject(project); err != nil {
		return "", err
	}
	if err := CheckDSN(dsnOrPath); err != nil {
		return "", err
	}
	if BackendFor(dsnOrPath) == "postgres" {
		u, err := url.Parse(dsnOrPath)
		if err != nil {
			return "", fmt.Errorf("store %s: %w", Redact(dsnOrPath), err)
		}
		q := u.Query()
		base := strings.TrimSpace(strings.Split(q.Get("search_path"), ",")[0])
		schema := strings.ToLower(base) + "__" + project // PostgreSQL folds unquoted names
		if len(base) > 1 && base[0] == '"' && base[len(base)-1] == '"' {
			schema = `"` + base[1:len(base)-1] + "__" + project + `"`
		}
		if base == "" || base == "$user" {
			schema = "public__" + project
		}
		q.Set("search_path", schema)
		u.RawQuery = q.Encode()
		return u.String(), nil
	}
	rest, prefixed := strings.CutPrefix(dsnOrPath, "file:")
	path, params, hasParams := strings.Cut(rest, "?")
	if path == ":memory:" || path == "" {
		return "", fmt.Errorf("store %s: an in-memory store has no projects; use a file (--db ./loupe.db)", dsnOrPath)
	}
	stem := strings.TrimSuffix(path, filepath.Ext(path))
	out := filepath.Join(stem+".projects", project+".db")
	if prefixed {
		out = "file:" + out
	}
	if hasParams {
		out += "?" + params
	}
	return out, nil
}

// A Dropper deletes the store at dsn and everything in it; see
// RegisterDropper and DropProject.
type Dropper func(ctx context.Context, dsn string) error

var droppers = map[string]Dropper{}

// RegisterDropper makes DropProject use drop for the stores of backend
// name whose data is not a file (PostgreSQL: the DSN's schema). Backends
// call it from init; registering a name twice panics.
func RegisterDropper(name string, drop Dropper) { register(droppers, "dropper", name, drop) }

// DropProject deletes the store of project beside the store at dsnOrPath
// (see ProjectDSN), and every trace, score, setting and dataset in it: for
// SQLite the file NAME.projects/PROJECT.db and its -wal, -shm and
// -journal files, for PostgreSQL the schema SCHEMA__PROJECT with
// everything in it (DROP SCHEMA … CASCADE), never another. A store that
// does not exist is no error. DefaultProject and names CheckProject
// refuses are errors. The caller closes every Store open on the project
// first: a SQLite store still open keeps writing to the removed file, and
// a PostgreSQL one fails from then on.
func DropProject(ctx context.Context, dsnOrPath, project string) error {
	if project == DefaultProject || project == "" {
		return fmt.Errorf("project %q cannot be deleted: it is the store itself (delete its traces with loupe traces rm, or the store)", DefaultProject)
	}
	if err := CheckProject(project); err != nil {
		return err
	}
	if dsnOrPath == "" {
		dsnOrPath = DefaultPath()
	}
	pdsn, err := ProjectDSN(dsnOrPath, project)
	if err != nil {
		return err
	}
	name := BackendFor(pdsn)
	if name == "postgres" {
		regMu.RLock()
		drop := droppers[name]
		regMu.RUnlock()
		if drop == nil {
			return fmt.Errorf("store %s: this program was built without the %s backend (import github.com/loupe-dev/loupe/store/backends)", Redact(pdsn), name)
		}
		return drop(ctx, pdsn)
	}
	path, _, _ := strings.Cut(strings.TrimPrefix(pdsn, "file:"), "?")
	// The logs first and the database last, so that a database made again
	// under the name never meets an old log.
	for _, suffix := range []string{"-wal", "-shm", "-journal", ""} {
		if err := os.Remove(path + suffix); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("project %s: %w", project, err)
		}
	}
	return nil
}
