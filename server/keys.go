package server

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/loupe-dev/loupe/store"
)

// Scope is what an API key allows.
type Scope string

// API key scopes.
const (
	ScopeIngest Scope = "ingest" // POST /v1/records, /v1/traces and /api/v1/scores only
	ScopeRead   Scope = "read"   // GET /api/v1/... only
	ScopeAdmin  Scope = "admin"  // everything, deletion included
)

// ParseScope returns the scope named s.
func ParseScope(s string) (Scope, error) {
	switch sc := Scope(strings.ToLower(strings.TrimSpace(s))); sc {
	case ScopeIngest, ScopeRead, ScopeAdmin:
		return sc, nil
	}
	return "", fmt.Errorf("unknown key scope %q (want ingest, read or admin)", s)
}

// Key is a stored API key: never the key itself, only its SHA-256.
type Key struct {
	ID      string    `json:"id"`      // public, the 16 hex digits after "lk_" in the key
	Scope   Scope     `json:"scope"`   //
	Name    string    `json:"name"`    // a label given at creation
	Created time.Time `json:"created"` //
	SHA256  string    `json:"sha256"`  // hex SHA-256 of the whole key

	// Projects are the projects the key may use; the first is the one its
	// requests go to when they name none. AllProjects ("*") allows every
	// project. Empty means the default project only (keys made before
	// projects existed).
	Projects []string `json:"projects,omitempty"`
}

// keyPrefix is the settings namespace of API keys.
const keyPrefix = "apikey:"

// ErrNoKeyStore is returned when the store cannot keep API keys.
var ErrNoKeyStore = errors.New("this store cannot keep API keys (it does not implement store.Settings)")

func settings(st store.Store) (store.Settings, error) {
	s, ok := st.(store.Settings)
	if !ok {
		return nil, ErrNoKeyStore
	}
	return s, nil
}

// CreateKey makes a new API key with scope for projects (none means the
// default project; AllProjects, every one), stores its hash in st (the
// default project's store) and returns the key, "lk_<id>_<secret>", which
// is shown once and cannot be recovered: the secret is 32 random bytes, so
// a plain SHA-256 (not a slow password hash) is enough to make the stored
// hash useless to a thief.
func CreateKey(ctx context.Context, st store.Store, sc Scope, name string, now time.Time, projects ...string) (string, Key, error) {
	set, err := settings(st)
	if err != nil {
		return "", Key{}, err
	}
	if _, err := ParseScope(string(sc)); err != nil {
		return "", Key{}, err
	}
	var ps []string
	for _, p := range projects {
		if p != AllProjects {
			if err := store.CheckProject(p); err != nil {
				return "", Key{}, err
			}
		}
		if !slices.Contains(ps, p) {
			ps = append(ps, p)
		}
	}
	if len(ps) == 1 && ps[0] == store.DefaultProject {
		ps = nil
	}
	var id [8]byte
	var secret [32]byte
	if _, err := rand.Read(id[:]); err != nil {
		return "", Key{}, err
	}
	if _, err := rand.Read(secret[:]); err != nil {
		return "", Key{}, err
	}
	k := Key{ID: hex.EncodeToString(id[:]), Scope: sc, Name: name, Created: now.UTC().Truncate(time.Second), Projects: ps}
	token := "lk_" + k.ID + "_" + base64.RawURLEncoding.EncodeToString(secret[:])
	sum := sha256.Sum256([]byte(token))
	k.SHA256 = hex.EncodeToString(sum[:])
	b, _ := json.Marshal(k)
	if err := set.PutSetting(ctx, keyPrefix+k.ID, string(b)); err != nil {
		return "", Key{}, fmt.Errorf("storing the key: %w", err)
	}
	return token, k, nil
}

// Keys returns the stored keys, oldest first.
func Keys(ctx context.Context, st store.Store) ([]Key, error) {
	set, err := settings(st)
	if err != nil {
		return nil, err
	}
	m, err := set.Settings(ctx, keyPrefix)
	if err != nil {
		return nil, err
	}
	var out []Key
	for name, v := range m {
		var k Key
		if err := json.Unmarshal([]byte(v), &k); err != nil {
			return nil, fmt.Errorf("stored key %s is not readable: %v", name, err)
		}
		out = append(out, k)
	}
	slices.SortFunc(out, func(a, b Key) int {
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out, nil
}

// RevokeKey deletes the key with id (the 16 hex digits, or the whole key).
// Every server sharing the store refuses it from its next request on.
func RevokeKey(ctx context.Context, st store.Store, id string) error {
	set, err := settings(st)
	if err != nil {
		return err
	}
	if kid, ok := keyID(id); ok {
		id = kid
	}
	ok, err := set.DeleteSetting(ctx, keyPrefix+id)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("no key with id %q (see loupe keys ls): %w", id, store.ErrNotFound)
	}
	// The web UI's sessions of the key go with it (collectors that saw
	// them refuse them within keyRecheck).
	all, err := set.Settings(ctx, sessionPrefix)
	if err != nil {
		return err
	}
	for name, v := range all {
		var st storedSession
		if json.Unmarshal([]byte(v), &st) == nil && st.KeyID == id {
			if _, err := set.DeleteSetting(ctx, name); err != nil {
				return err
			}
		}
	}
	return nil
}

// keyID returns the id part of a key "lk_<id>_<secret>".
func keyID(token string) (string, bool) {
	rest, ok := strings.CutPrefix(token, "lk_")
	if !ok {
		return "", false
	}
	id, _, ok := strings.Cut(rest, "_")
	if !ok || len(id) != 16 {
		return "", false
	}
	return id, true
}

// authError is why a request's credentials (a key, a session) are refused:
// the client's to fix, answered 401. Other errors are the store's.
type authError string

func (e authError) Error() string { return string(e) }

// authenticate returns the stored key that token is.
func authenticate(ctx context.Context, set store.Settings, token string) (Key, error) {
	id, ok := keyID(token)
	if !ok {
		return Key{}, authError("malformed API key (want lk_<id>_<secret>, as loupe keys create prints it)")
	}
	k, err := storedKey(ctx, set, id)
	if err != nil {
		return Key{}, err
	}
	if k == nil {
		return Key{}, authError("unknown or revoked API key")
	}
	sum := sha256.Sum256([]byte(token))
	want, err := hex.DecodeString(k.SHA256)
	if err != nil || subtle.ConstantTimeCompare(sum[:], want) != 1 {
		return Key{}, authError("unknown or revoked API key")
	}
	return *k, nil
}

// authorize checks the request's credentials against need: an API key
// (Authorization: Bearer …) or, on /api/ paths only and when no
// Authorization header is sent, the web UI's session cookie (see
// sessions). It answers 401 or 403 itself and reports whether the request
// may go on, and as whom.
func (s *Server) authorize(w http.ResponseWriter, r *http.Request, need scope) (identity, bool) {
	h := r.Header.Get("Authorization")
	if h == "" && strings.HasPrefix(r.URL.Path, "/api/") {
		if c, err := r.Cookie(SessionCookie); err == nil {
			k, exp, err := s.sessions.lookup(r.Context(), s.keys, c.Value, s.now())
			if err != nil {
				var ae authError
				if errors.As(err, &ae) {
					clearSessionCookie(w, r)
					writeError(w, http.StatusUnauthorized, err.Error())
				} else {
					s.storeError(w, r, err)
				}
				return identity{}, false
			}
			id := identity{key: k, session: true, expires: exp}
			return id, s.allowed(w, r, k, need)
		}
	}
	token, ok := strings.CutPrefix(h, "Bearer ")
	if !ok || strings.TrimSpace(token) == "" {
		w.Header().Set("WWW-Authenticate", `Bearer realm="loupe"`)
		writeError(w, http.StatusUnauthorized, "this server requires an API key: send Authorization: Bearer <key> (create one with loupe keys create), or sign in to the web UI")
		return identity{}, false
	}
	k, err := authenticate(r.Context(), s.keys, strings.TrimSpace(token))
	if err != nil {
		var ae authError
		if errors.As(err, &ae) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="loupe", error="invalid_token"`)
			writeError(w, http.StatusUnauthorized, err.Error())
		} else {
			s.storeError(w, r, err)
		}
		return identity{}, false
	}
	return identity{key: k}, s.allowed(w, r, k, need)
}

// allowed answers 403 unless k's scope allows need.
func (s *Server) allowed(w http.ResponseWriter, r *http.Request, k Key, need scope) bool {
	ok := k.Scope == ScopeAdmin ||
		need == scopeIngest && k.Scope == ScopeIngest ||
		need == scopeRead && k.Scope == ScopeRead
	if !ok {
		writeError(w, http.StatusForbidden, fmt.Sprintf("API key %s has scope %s, which does not allow %s %s", k.ID, k.Scope, r.Method, clip(r.URL.Path, 100)))
	}
	return ok
}

// mcpToken is the token verifier of /mcp: the API key's scope becomes the
// token's only scope, and its id the user, so that an MCP session stays
// with the key that opened it; its name goes in Extra under "key_name",
// where the MCP server's add_score reads the author of a score.
func (s *Server) mcpToken(ctx context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
	k, err := authenticate(ctx, s.keys, token)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", auth.ErrInvalidToken, err)
	}
	return &auth.TokenInfo{Scopes: []string{string(k.Scope)}, UserID: k.ID, Extra: map[string]any{"key_name": k.Name}}, nil
}
