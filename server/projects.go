package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/loupe-dev/loupe/alert"
	"github.com/loupe-dev/loupe/online"
	"github.com/loupe-dev/loupe/store"
)

// Projects keep teams apart on one server: every trace, score, dataset,
// rule, monitor and retention period belongs to one project, and a
// request sees one project only. Each project other than the default one
// is a store of its own (store.ProjectDSN), opened by Options.Projects the
// first time a request names it and served by a Server of its own (its
// own live streams, group commit, retention passes, monitors and rules),
// so a query cannot reach another project's rows whatever it asks. The
// projects that exist, the API keys and the web UI's sessions are kept in
// the default project's store.
//
// A request names its project by the Loupe-Project header, the project
// query parameter, the loupe_project cookie (what the web UI sets), or,
// for OTLP, the resource attribute loupe.project; with none, it is the
// key's first project, or the default one. With Options.RequireKeys, the
// key must allow the project (Key.Projects).

// ProjectHeader is the request header, and the gRPC metadata key
// (lower-cased), that names a request's project.
const ProjectHeader = "Loupe-Project"

// ProjectCookie is the cookie the web UI keeps the chosen project in.
const ProjectCookie = "loupe_project"

// ProjectAttribute is the OTLP resource attribute that names the project
// of the spans and logs under that resource.
const ProjectAttribute = "loupe.project"

// AllProjects in Key.Projects lets a key use every project, and manage
// them (POST /api/v1/projects needs an admin key that allows it).
const AllProjects = "*"

// Project is what a server needs to serve a project other than the
// default one. Store is required.
type Project struct {
	Store  store.Store
	Online *online.Engine // the project's rules; nil for none
	Alerts *alert.Engine  // the project's monitors; nil builds one on Store, as for the default project
	MCP    http.Handler   // /mcp for the project; nil for none

	// Close, if set, is called once when the server closes, after the
	// project's streams, retention and branches have stopped; it closes
	// what the opener opened.
	Close func() error
}

// A ProjectOpener opens the parts of project name (never
// store.DefaultProject, and only a project that exists: see
// CreateProject). The server calls it at most once per project at a
// time, the first time a request names the project, and keeps what it
// returns until Close.
type ProjectOpener func(ctx context.Context, name string) (*Project, error)

// ProjectInfo is a project as GET /api/v1/projects lists it.
type ProjectInfo struct {
	Name    string    `json:"name"`
	Created time.Time `json:"created,omitzero"`
}

// ProjectURL returns the address of project's pages in the web UI at
// base ("http://127.0.0.1:4318/"): base itself for the default project,
// else base with the project query parameter, which the UI keeps.
func ProjectURL(base, project string) string {
	if project == "" || project == store.DefaultProject {
		return base
	}
	return strings.TrimSuffix(base, "/") + "/?project=" + url.QueryEscape(project)
}

// projectPrefix is the settings namespace of projects in the default
// project's store.
const projectPrefix = "project:"

// ErrProjectExists is returned by CreateProject for a name already taken.
var ErrProjectExists = errors.New("the project exists already")

// CreateProject records a new project called name in st, the default
// project's store. Its traces go to the store at
// store.ProjectDSN(st's DSN, name), which the server's ProjectOpener
// opens (and creates) when a request first names the project.
func CreateProject(ctx context.Context, st store.Store, name string, now time.Time) (ProjectInfo, error) {
	set, err := settings(st)
	if err != nil {
		return ProjectInfo{}, err
	}
	if err := store.CheckProject(name); err != nil {
		return ProjectInfo{}, err
	}
	if name == store.DefaultProject {
		return ProjectInfo{}, fmt.Errorf("project %q: %w (every store has it)", name, ErrProjectExists)
	}
	old, err := set.Settings(ctx, projectPrefix+name)
	if err != nil {
		return ProjectInfo{}, err
	}
	if _, ok := old[projectPrefix+name]; ok {
		return ProjectInfo{}, fmt.Errorf("project %q: %w", name, ErrProjectExists)
	}
	p := ProjectInfo{Name: name, Created: now.UTC().Truncate(time.Second)}
	b, _ := json.Marshal(p)
	if err := set.PutSetting(ctx, projectPrefix+name, string(b)); err != nil {
		return ProjectInfo{}, fmt.Errorf("storing the project: %w", err)
	}
	return p, nil
}

// Projects returns the projects recorded in st, the default one first,
// then by name.
func Projects(ctx context.Context, st store.Store) ([]ProjectInfo, error) {
	out := []ProjectInfo{{Name: store.DefaultProject}}
	set, ok := st.(store.Settings)
	if !ok {
		return out, nil
	}
	m, err := set.Settings(ctx, projectPrefix)
	if err != nil {
		return nil, err
	}
	var rest []ProjectInfo
	for k, v := range m {
		p := ProjectInfo{Name: strings.TrimPrefix(k, projectPrefix)}
		json.Unmarshal([]byte(v), &p) // a damaged entry still names its project
		if store.CheckProject(p.Name) == nil {
			rest = append(rest, p)
		}
	}
	slices.SortFunc(rest, func(a, b ProjectInfo) int { return strings.Compare(a.Name, b.Name) })
	return append(out, rest...), nil
}

// projectExists reports whether name is recorded in the default store.
func (s *Server) projectExists(ctx context.Context, name string) (bool, error) {
	if name == store.DefaultProject {
		return true, nil
	}
	if s.keys == nil {
		return false, nil
	}
	m, err := s.keys.Settings(ctx, projectPrefix+name)
	if err != nil {
		return false, err
	}
	_, ok := m[projectPrefix+name]
	return ok, nil
}

// projectSet is the root server's open projects.
type projectSet struct {
	mu     sync.Mutex
	subs   map[string]*Server
	opens  map[string]chan struct{} // closed when an open in progress ends
	closed bool
}

// errNoProject is a project name that is not recorded (or the server
// cannot open).
type errNoProject string

func (e errNoProject) Error() string {
	return fmt.Sprintf("no project %q on this server (see GET /api/v1/projects; an admin makes one with loupe projects add)", string(e))
}

// project returns the server of project name: s itself for s's project,
// else the root's sub-server, opened on first use.
func (s *Server) project(ctx context.Context, name string) (*Server, error) {
	root := s.top()
	if name == "" || name == root.name {
		return root, nil
	}
	ps := &root.projects
	for {
		ps.mu.Lock()
		if ps.closed {
			ps.mu.Unlock()
			return nil, errors.New("the server is closing")
		}
		if sub := ps.subs[name]; sub != nil {
			ps.mu.Unlock()
			return sub, nil
		}
		wait, busy := ps.opens[name]
		if !busy {
			wait = make(chan struct{})
			if ps.opens == nil {
				ps.opens = map[string]chan struct{}{}
			}
			ps.opens[name] = wait
			ps.mu.Unlock()
			sub, err := root.openProject(ctx, name)
			ps.mu.Lock()
			delete(ps.opens, name)
			close(wait)
			if err == nil {
				if ps.closed {
					ps.mu.Unlock()
					sub.Close()
					return nil, errors.New("the server is closing")
				}
				if ps.subs == nil {
					ps.subs = map[string]*Server{}
				}
				ps.subs[name] = sub
			}
			ps.mu.Unlock()
			return sub, err
		}
		ps.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// openProject opens project name's parts and makes its server.
func (s *Server) openProject(ctx context.Context, name string) (*Server, error) {
	if err := store.CheckProject(name); err != nil {
		return nil, errNoProject(name)
	}
	ok, err := s.projectExists(ctx, name)
	if err != nil {
		return nil, err
	}
	if !ok || s.o.Projects == nil {
		return nil, errNoProject(name)
	}
	p, err := s.o.Projects(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("opening project %s: %w", name, err)
	}
	if p == nil || p.Store == nil {
		return nil, fmt.Errorf("opening project %s: the opener returned no store", name)
	}
	o := s.o
	o.Store, o.Online, o.Alerts, o.MCP, o.Projects = p.Store, p.Online, p.Alerts, p.MCP, nil
	sub, err := newServer(o, s, name)
	if err != nil {
		if p.Close != nil {
			p.Close()
		}
		return nil, err
	}
	sub.closeParts = p.Close
	s.log.Info("loupe serve: project opened", "project", name)
	return sub, nil
}

// top returns the root server (the one that answers requests).
func (s *Server) top() *Server {
	if s.root != nil {
		return s.root
	}
	return s
}

// closeProjects closes every open project's server and parts.
func (s *Server) closeProjects() {
	ps := &s.projects
	ps.mu.Lock()
	ps.closed = true
	subs := ps.subs
	ps.subs = nil
	ps.mu.Unlock()
	for _, sub := range subs {
		sub.Close()
	}
}

// openProjects returns the servers of every project open now, s's first.
func (s *Server) openProjects() []*Server {
	root := s.top()
	out := []*Server{root}
	root.projects.mu.Lock()
	for _, sub := range root.projects.subs {
		out = append(out, sub)
	}
	root.projects.mu.Unlock()
	slices.SortFunc(out[1:], func(a, b *Server) int { return strings.Compare(a.name, b.name) })
	return out
}

// requestProject is the project a request names (see the package's
// Projects section), checked against what its key allows.
func requestProject(r *http.Request, id *identity) string {
	if p := strings.TrimSpace(r.Header.Get(ProjectHeader)); p != "" {
		return p
	}
	if p := r.URL.Query().Get("project"); p != "" {
		return p
	}
	if c, err := r.Cookie(ProjectCookie); err == nil && c.Value != "" {
		if id == nil || id.key.allows(c.Value) {
			return c.Value
		}
	}
	if id != nil {
		return id.key.homeProject()
	}
	return store.DefaultProject
}

// allows reports whether k may use project p.
func (k Key) allows(p string) bool {
	if len(k.Projects) == 0 {
		return p == store.DefaultProject
	}
	return slices.Contains(k.Projects, AllProjects) || slices.Contains(k.Projects, p)
}

// homeProject is the project of k's requests that name none: its first
// project, or the default one.
func (k Key) homeProject() string {
	if len(k.Projects) == 0 || k.Projects[0] == AllProjects {
		return store.DefaultProject
	}
	return k.Projects[0]
}

// projectError is a project a request may not use, or that does not
// exist. Both read alike to a key that may not use the project, so that
// it learns nothing of the projects of others.
type projectError struct {
	msg     string
	missing bool // the project does not exist (and the key may use it)
}

func (e *projectError) Error() string { return e.msg }

// projectFor returns the server of project p for a request whose identity
// (with RequireKeys) is in ctx: a *projectError when the key may not use p
// or p does not exist.
func (s *Server) projectFor(ctx context.Context, p string) (*Server, error) {
	root := s.top()
	if root.o.RequireKeys {
		id, ok := ctx.Value(identityKey{}).(identity)
		if !ok {
			return nil, &projectError{msg: "no API key"}
		}
		if !id.key.allows(p) {
			return nil, &projectError{msg: fmt.Sprintf("API key %s may not use project %q (its projects: %s)", id.key.ID, clip(p, 60), strings.Join(id.key.projectList(), ", "))}
		}
	}
	sub, err := root.project(ctx, p)
	var np errNoProject
	if errors.As(err, &np) {
		return nil, &projectError{msg: np.Error(), missing: true}
	}
	return sub, err
}

// dispatchProject answers 403 or 404 unless the request may use project
// p; it reports whether the request may go on, and to which server.
func (s *Server) dispatchProject(w http.ResponseWriter, r *http.Request, p string) (*Server, bool) {
	sub, err := s.projectFor(r.Context(), p)
	if err != nil {
		var pe *projectError
		switch {
		case errors.As(err, &pe) && pe.missing:
			writeError(w, http.StatusNotFound, pe.Error())
		case errors.As(err, &pe):
			writeError(w, http.StatusForbidden, pe.Error())
		default:
			s.storeError(w, r, err)
		}
		return nil, false
	}
	return sub, true
}

// projectList is k's projects as a person reads them.
func (k Key) projectList() []string {
	if len(k.Projects) == 0 {
		return []string{store.DefaultProject}
	}
	return k.Projects
}

// ProjectsJSON is the answer of GET /api/v1/projects.
type ProjectsJSON struct {
	Projects []ProjectInfo `json:"projects"`
	// Current is the project the request was answered for: the one the
	// API is scoped to for this client until it names another.
	Current string `json:"current"`
}

// listProjects answers the projects the request's key may use.
func (s *Server) listProjects(w http.ResponseWriter, r *http.Request) {
	all, err := Projects(r.Context(), s.o.Store)
	if err != nil {
		s.storeError(w, r, err)
		return
	}
	var id *identity
	if v, ok := r.Context().Value(identityKey{}).(identity); ok && s.o.RequireKeys {
		id = &v
	}
	out := ProjectsJSON{Projects: []ProjectInfo{}, Current: requestProject(r, id)}
	for _, p := range all {
		if id == nil || id.key.allows(p.Name) {
			out.Projects = append(out.Projects, p)
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// postProject makes a project: {"name": "team_a"}. Only an admin key that
// allows every project may (or anyone, without RequireKeys).
func (s *Server) postProject(w http.ResponseWriter, r *http.Request) {
	if v, ok := r.Context().Value(identityKey{}).(identity); ok && s.o.RequireKeys && !slices.Contains(v.key.Projects, AllProjects) {
		writeError(w, http.StatusForbidden, fmt.Sprintf("API key %s may not make projects: that takes an admin key for every project (loupe keys create --scope admin --project '*')", v.key.ID))
		return
	}
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		writeError(w, http.StatusUnsupportedMediaType, `send the project as JSON: Content-Type: application/json, {"name": "team_a"}`)
		return
	}
	var body struct {
		Name string `json:"name"`
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil {
		writeError(w, http.StatusBadRequest, `the body is not {"name": "…"}: `+clip(err.Error(), 200))
		return
	}
	p, err := CreateProject(r.Context(), s.o.Store, body.Name, s.now())
	switch {
	case errors.Is(err, ErrProjectExists):
		writeError(w, http.StatusConflict, err.Error())
	case err != nil && store.CheckProject(body.Name) != nil:
		writeError(w, http.StatusBadRequest, err.Error())
	case err != nil:
		s.storeError(w, r, err)
	default:
		writeJSON(w, http.StatusCreated, p)
	}
}
