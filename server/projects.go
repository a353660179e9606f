package server

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
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
//
// DeleteProject (DELETE /api/v1/projects/{name}) deletes a project: the
// root closes the project's server once its requests in flight have ended
// (live streams at once, others after a grace period), then drops its
// store (Options.DropProject). Collectors sharing the store notice that
// the project's entry is gone or changed within a second of a request
// naming it, or within five seconds without one, and close it too.

// ProjectHeader is the request header, and the gRPC metadata key
// (lower-cased), that names a request's project.
const ProjectHeader = "Loupe-Project"

// ProjectCookie is the cookie the web UI keeps the chosen project in.
const ProjectCookie = "loupe_project"

// ProjectAttribute is the OTLP resource attribute that names the project
// of the spans and logs under that resource.
const ProjectAttribute = "loupe.project"

// AllProjects in Key.Projects lets a key use every project, and manage
// them (POST /api/v1/projects and DELETE /api/v1/projects/{name} need an
// admin key that allows it).
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
	// The nonce tells this project from one deleted and made again under
	// its name: a collector serving the old one sees the entry change.
	b, _ := json.Marshal(storedProject{p, rand.Text()})
	if err := set.PutSetting(ctx, projectPrefix+name, string(b)); err != nil {
		return ProjectInfo{}, fmt.Errorf("storing the project: %w", err)
	}
	return p, nil
}

// storedProject is a project's entry in the default store's settings.
type storedProject struct {
	ProjectInfo
	Nonce string `json:"nonce,omitempty"`
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

// projectEntry returns name's entry in the default store ("" and false
// when it has none): what a collector compares to see that a project it
// serves was deleted, or deleted and made again.
func (s *Server) projectEntry(ctx context.Context, name string) (string, bool, error) {
	if s.keys == nil {
		return "", false, nil
	}
	m, err := s.keys.Settings(ctx, projectPrefix+name)
	if err != nil {
		return "", false, err
	}
	v, ok := m[projectPrefix+name]
	return v, ok, nil
}

// projectSet is the root server's open projects.
type projectSet struct {
	mu     sync.Mutex
	subs   map[string]*Server
	opens  map[string]chan struct{} // closed when an open in progress ends
	drops  map[string]chan struct{} // closed when a deletion in progress ends
	closed bool

	stopSweep, swept chan struct{} // sweepProjects; nil on a project's server
}

// projectRecheck is how often a collector asks the default store whether
// a project it serves still exists (as it was opened), so that one deleted
// through another collector, or by loupe projects rm, stops being served.
const projectRecheck = time.Second

// projectGrace is how long deleting a project waits for its requests in
// flight to end before it cancels them.
const projectGrace = 10 * time.Second

// lease counts the requests in flight on a project's server, so that
// deleting the project closes it after they end.
type lease struct {
	mu      sync.Mutex
	n       int
	retired bool
	idle    chan struct{}      // closed once retired and n is 0
	ctx     context.Context    // the requests' contexts end with it
	cancel  context.CancelFunc //
	entry   string             // the project's entry when it was opened (projectEntry)
	checked atomic.Int64       // when entry was last confirmed, Unix ns
}

// use marks a request in flight on sub, with a context that ends when
// ctx does or when sub's project is deleted and its grace has passed;
// done ends it. ok is false when sub is retired. The root is always
// usable.
func (sub *Server) use(ctx context.Context) (_ context.Context, done func(), ok bool) {
	if sub.root == nil {
		return ctx, func() {}, true
	}
	l := &sub.life
	l.mu.Lock()
	if l.retired {
		l.mu.Unlock()
		return ctx, func() {}, false
	}
	l.n++
	l.mu.Unlock()
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(l.ctx, cancel)
	return ctx, func() {
		stop()
		cancel()
		l.mu.Lock()
		if l.n--; l.n == 0 && l.retired {
			close(l.idle)
		}
		l.mu.Unlock()
	}, true
}

// retire closes sub, which the caller took out of the open projects:
// its live streams end at once, its other requests in flight may finish
// for projectGrace and are then canceled, and once none is left its
// retention, commit watch, branches, rules, monitors, MCP server and
// store are closed.
func (sub *Server) retire() {
	l := &sub.life
	l.mu.Lock()
	l.retired = true
	if l.n == 0 {
		close(l.idle)
	}
	l.mu.Unlock()
	sub.hub.close()
	t := time.NewTimer(projectGrace)
	select {
	case <-l.idle:
	case <-t.C:
		sub.log.Warn("loupe serve: canceling the requests still in flight on a deleted project")
		l.cancel()
		<-l.idle
	}
	t.Stop()
	l.cancel()
	sub.Close()
}

// errNoProject is a project name that is not recorded (or the server
// cannot open).
type errNoProject string

func (e errNoProject) Error() string {
	return fmt.Sprintf("no project %q on this server (see GET /api/v1/projects; an admin makes one with loupe projects add)", string(e))
}

// project returns the server of project name, in use by the caller
// until it calls done, with the context its work should use: the root
// itself for the root's project, else the root's sub-server, opened on
// first use.
func (s *Server) project(ctx context.Context, name string) (_ *Server, _ context.Context, done func(), _ error) {
	root := s.top()
	if name == "" || name == root.name {
		return root, ctx, func() {}, nil
	}
	ps := &root.projects
	for {
		ps.mu.Lock()
		if ps.closed {
			ps.mu.Unlock()
			return nil, ctx, nil, errors.New("the server is closing")
		}
		if wait, busy := ps.drops[name]; busy { // being deleted: then it is gone
			ps.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return nil, ctx, nil, ctx.Err()
			}
		}
		if sub := ps.subs[name]; sub != nil {
			if last := sub.life.checked.Load(); time.Since(time.Unix(0, last)) > projectRecheck && sub.life.checked.CompareAndSwap(last, time.Now().UnixNano()) {
				// This request asks the store; the others go on meanwhile.
				ps.mu.Unlock()
				if root.stale(ctx, sub) {
					ps.mu.Lock()
					gone := ps.subs[name] == sub
					if gone {
						delete(ps.subs, name)
					}
					ps.mu.Unlock()
					if gone {
						root.log.Info("loupe serve: project closed: deleted by another collector or loupe projects rm", "project", name)
						go sub.retire()
					}
				}
				continue
			}
			uctx, done, ok := sub.use(ctx)
			ps.mu.Unlock()
			if !ok {
				continue
			}
			return sub, uctx, done, nil
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
			if err != nil {
				ps.mu.Unlock()
				return nil, ctx, nil, err
			}
			if ps.closed {
				ps.mu.Unlock()
				sub.Close()
				return nil, ctx, nil, errors.New("the server is closing")
			}
			if ps.subs == nil {
				ps.subs = map[string]*Server{}
			}
			ps.subs[name] = sub
			uctx, done, _ := sub.use(ctx)
			ps.mu.Unlock()
			return sub, uctx, done, nil
		}
		ps.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return nil, ctx, nil, ctx.Err()
		}
	}
}

// stale reports whether sub's project was deleted (or deleted and made
// again) since sub was opened; a failing store is not taken for a
// deletion.
func (s *Server) stale(ctx context.Context, sub *Server) bool {
	entry, ok, err := s.projectEntry(ctx, sub.name)
	return err == nil && (!ok || entry != sub.life.entry)
}

// OpenProject opens project name now, as the first request naming it
// would (a collector opens the projects it was given rules or monitors for
// at start, so that they run before a request names them). The default
// project is always open; a project that does not exist is an error.
func (s *Server) OpenProject(ctx context.Context, name string) error {
	_, _, done, err := s.top().project(ctx, name)
	if err != nil {
		return err
	}
	done()
	return nil
}

// openProject opens project name's parts and makes its server.
func (s *Server) openProject(ctx context.Context, name string) (*Server, error) {
	if err := store.CheckProject(name); err != nil {
		return nil, errNoProject(name)
	}
	entry, ok, err := s.projectEntry(ctx, name)
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
	sub.life.entry = entry
	sub.life.checked.Store(time.Now().UnixNano())
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

// sweepProjects closes, every projectSweep until stop is closed, the
// open projects that were deleted (or deleted and made again) through
// another collector or loupe projects rm, so that their live streams,
// rules and monitors stop even when no request names them.
func (s *Server) sweepProjects(stop <-chan struct{}) {
	t := time.NewTicker(projectSweep)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		ps := &s.projects
		ps.mu.Lock()
		open := len(ps.subs)
		ps.mu.Unlock()
		if open == 0 || s.keys == nil {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		entries, err := s.keys.Settings(ctx, projectPrefix)
		cancel()
		if err != nil {
			continue
		}
		var gone []*Server
		ps.mu.Lock()
		for name, sub := range ps.subs {
			if entries[projectPrefix+name] != sub.life.entry {
				delete(ps.subs, name)
				gone = append(gone, sub)
			}
		}
		ps.mu.Unlock()
		for _, sub := range gone {
			s.log.Info("loupe serve: project closed: deleted by another collector or loupe projects rm", "project", sub.name)
			sub.retire()
		}
	}
}

// projectSweep is how often a collector looks for deleted projects among
// those it has open (see sweepProjects).
const projectSweep = 5 * time.Second

// closeProjects closes every open project's server and parts.
func (s *Server) closeProjects() {
	ps := &s.projects
	if ps.stopSweep != nil {
		close(ps.stopSweep)
		<-ps.swept
		ps.stopSweep = nil
	}
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
//
// The server is in use until done is called, and the work done there
// should use the returned context, which ends when the project is deleted.
func (s *Server) projectFor(ctx context.Context, p string) (_ *Server, _ context.Context, done func(), _ error) {
	root := s.top()
	if root.o.RequireKeys {
		id, ok := ctx.Value(identityKey{}).(identity)
		if !ok {
			return nil, ctx, nil, &projectError{msg: "no API key"}
		}
		if !id.key.allows(p) {
			return nil, ctx, nil, &projectError{msg: fmt.Sprintf("API key %s may not use project %q (its projects: %s)", id.key.ID, clip(p, 60), strings.Join(id.key.projectList(), ", "))}
		}
	}
	sub, ctx, done, err := root.project(ctx, p)
	var np errNoProject
	if errors.As(err, &np) {
		return nil, ctx, nil, &projectError{msg: np.Error(), missing: true}
	}
	return sub, ctx, done, err
}

// dispatchProject answers 403 or 404 unless the request may use project
// p; it reports whether the request may go on, to which server and with
// which request (its context ends when the project is deleted), and the
// done of projectFor.
func (s *Server) dispatchProject(w http.ResponseWriter, r *http.Request, p string) (*Server, *http.Request, func(), bool) {
	sub, ctx, done, err := s.projectFor(r.Context(), p)
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
		return nil, r, nil, false
	}
	if ctx != r.Context() {
		r = r.WithContext(ctx)
	}
	return sub, r, done, true
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

// ErrDefaultProject is returned by DeleteProject for the default project,
// which is the store itself.
var ErrDefaultProject = errors.New(`the project "default" cannot be deleted: it is the store itself, and keeps the keys and the list of projects`)

// ProjectDeletion is what deleting a project did, as
// DELETE /api/v1/projects/{name} answers it.
type ProjectDeletion struct {
	Name string `json:"name"`
	// KeysChanged are the ids of the keys that named the project among
	// others: they keep the others. KeysRevoked are those of the keys
	// that named it alone, which could use nothing any more.
	KeysChanged []string `json:"keys_changed"`
	KeysRevoked []string `json:"keys_revoked"`
}

// DeleteProject deletes project name recorded in st, the default
// project's store: it takes the project off the list, calls drop, which
// deletes the project's store (see store.DropProject; a collector first
// closes what it has open of the project), and then takes the project
// from the keys that name it. A key left with no project is revoked:
// with none it would fall back to the default project. If drop fails the
// project is listed again and the error returned; deleting it again
// retries. The default project is ErrDefaultProject; a name that is not
// a project is an error wrapping store.ErrNotFound, like a project that
// was never made. Making the project again afterwards starts it empty,
// with no keys but those for every project.
func DeleteProject(ctx context.Context, st store.Store, name string, drop func(context.Context) error) (ProjectDeletion, error) {
	out := ProjectDeletion{Name: name, KeysChanged: []string{}, KeysRevoked: []string{}}
	set, err := settings(st)
	if err != nil {
		return out, err
	}
	if name == store.DefaultProject {
		return out, ErrDefaultProject
	}
	if store.CheckProject(name) != nil {
		return out, fmt.Errorf("%w: %w", errNoProject(name), store.ErrNotFound)
	}
	m, err := set.Settings(ctx, projectPrefix+name)
	if err != nil {
		return out, err
	}
	entry, ok := m[projectPrefix+name]
	if !ok {
		return out, fmt.Errorf("%w: %w", errNoProject(name), store.ErrNotFound)
	}
	if ok, err := set.DeleteSetting(ctx, projectPrefix+name); err != nil {
		return out, err
	} else if !ok { // deleted meanwhile by another collector
		return out, fmt.Errorf("%w: %w", errNoProject(name), store.ErrNotFound)
	}
	if err := drop(ctx); err != nil {
		if perr := set.PutSetting(context.WithoutCancel(ctx), projectPrefix+name, entry); perr != nil {
			return out, fmt.Errorf("deleting project %s: %w; and listing it again failed: %v (its store may be left in part; making it again may not start it empty)", name, err, perr)
		}
		return out, fmt.Errorf("deleting project %s: %w (it is still listed; delete it again to retry)", name, err)
	}
	keys, err := set.Settings(ctx, keyPrefix)
	if err != nil {
		return out, fmt.Errorf("project %s is deleted, but its keys were not updated: %w (delete it again, or revoke them)", name, err)
	}
	for _, id := range slices.Sorted(maps.Keys(keys)) {
		var k Key
		if json.Unmarshal([]byte(keys[id]), &k) != nil || !slices.Contains(k.Projects, name) {
			continue
		}
		k.Projects = slices.DeleteFunc(k.Projects, func(p string) bool { return p == name })
		if len(k.Projects) == 0 {
			if err := RevokeKey(ctx, st, k.ID); err != nil && !errors.Is(err, store.ErrNotFound) {
				return out, fmt.Errorf("project %s is deleted, but revoking key %s failed: %w", name, k.ID, err)
			}
			out.KeysRevoked = append(out.KeysRevoked, k.ID)
			continue
		}
		b, _ := json.Marshal(k)
		if err := set.PutSetting(ctx, id, string(b)); err != nil {
			return out, fmt.Errorf("project %s is deleted, but updating key %s failed: %w", name, k.ID, err)
		}
		out.KeysChanged = append(out.KeysChanged, k.ID)
	}
	return out, nil
}

// dropProject deletes project name on the root server: requests naming
// it wait meanwhile and are then answered as for a project that does not
// exist; its server, if open, is closed (retire) before its store is
// dropped.
func (s *Server) dropProject(ctx context.Context, name string) (ProjectDeletion, error) {
	ps := &s.projects
	var sub *Server
	for {
		ps.mu.Lock()
		if ps.closed {
			ps.mu.Unlock()
			return ProjectDeletion{Name: name}, errors.New("the server is closing")
		}
		wait, busy := ps.opens[name]
		if !busy {
			wait, busy = ps.drops[name]
		}
		if !busy {
			break
		}
		ps.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return ProjectDeletion{Name: name}, ctx.Err()
		}
	}
	done := make(chan struct{})
	if ps.drops == nil {
		ps.drops = map[string]chan struct{}{}
	}
	ps.drops[name] = done
	sub = ps.subs[name]
	delete(ps.subs, name)
	ps.mu.Unlock()
	defer func() {
		ps.mu.Lock()
		delete(ps.drops, name)
		close(done)
		ps.mu.Unlock()
	}()
	retired := false
	res, err := DeleteProject(ctx, s.o.Store, name, func(ctx context.Context) error {
		if sub != nil {
			sub.retire()
			retired = true
			s.log.Info("loupe serve: project closed to be deleted", "project", name)
		}
		return s.o.DropProject(ctx, name)
	})
	if sub != nil && !retired {
		if errors.Is(err, store.ErrNotFound) {
			sub.retire() // deleted by another collector meanwhile
		} else {
			ps.mu.Lock()
			if ps.subs == nil {
				ps.subs = map[string]*Server{}
			}
			ps.subs[name] = sub
			ps.mu.Unlock()
		}
	}
	if err == nil {
		s.log.Info("loupe serve: project deleted", "project", name, "keys_changed", res.KeysChanged, "keys_revoked", res.KeysRevoked)
	}
	return res, err
}

// deleteProject deletes a project and its data: DELETE
// /api/v1/projects/{name}. Only an admin key that allows every project
// may (or anyone, without RequireKeys), as for making one.
func (s *Server) deleteProject(w http.ResponseWriter, r *http.Request) {
	if v, ok := r.Context().Value(identityKey{}).(identity); ok && s.o.RequireKeys && !slices.Contains(v.key.Projects, AllProjects) {
		writeError(w, http.StatusForbidden, fmt.Sprintf("API key %s may not delete projects: that takes an admin key for every project (loupe keys create --scope admin --projects '*')", v.key.ID))
		return
	}
	name := r.PathValue("name")
	if name == store.DefaultProject {
		writeError(w, http.StatusBadRequest, ErrDefaultProject.Error())
		return
	}
	if s.o.DropProject == nil {
		writeError(w, http.StatusNotImplemented, "this server cannot delete projects (use loupe projects rm)")
		return
	}
	// Once begun, a deletion is not stopped by a client that goes away.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 2*time.Minute)
	defer cancel()
	res, err := s.dropProject(ctx, name)
	switch {
	case errors.Is(err, store.ErrNotFound):
		writeError(w, http.StatusNotFound, errNoProject(clip(name, 60)).Error())
	case err != nil:
		// Not err's text: it names the store's file or database.
		s.log.Error("loupe serve: deleting a project", "project", name, "err", err)
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, "deleting the project failed (the server logged the details); unless the log says otherwise it is still listed: delete it again")
	default:
		writeJSON(w, http.StatusOK, res)
	}
}
