package server

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/loupe-dev/loupe/store"
)

// Sessions let the web UI, which cannot send an Authorization header on
// every request (EventSource cannot at all), use the API behind keys:
// POST /api/v1/session exchanges a read or admin key for a cookie, and
// authorize accepts that cookie on /api/v1 instead of the key.
//
// A session lasts SessionTTL from sign-in, fixed: using it does not
// extend it, so a stolen cookie is worth at most that long. It ends
// earlier when its key is revoked (checked at least every keyRecheck) or
// at sign-out. Sessions live in the server's memory: a restart signs
// everyone out, and servers sharing a store do not share sessions.
const (
	// SessionTTL is how long a UI session lasts from sign-in.
	SessionTTL = 12 * time.Hour

	// SessionCookie is the name of the session cookie.
	SessionCookie = "loupe_session"

	// keyRecheck is how long a session trusts its key's last lookup in the
	// store: a revoked key's sessions end at most this much later.
	keyRecheck = 5 * time.Second

	// maxSessionsPerKey bounds the sessions of one key: signing in once
	// more ends the one that expires first.
	maxSessionsPerKey = 64

	// maxSessionBody bounds the body of POST /api/v1/session.
	maxSessionBody = 4 << 10
)

// session is what the server keeps of a signed-in browser: never the
// cookie itself, which is the map's key only as its SHA-256.
type session struct {
	key     Key // the key signed in with (ID, Scope, Name, SHA256)
	expires time.Time
}

// keyCheck is the last lookup of a key in the store.
type keyCheck struct {
	sum string // the stored key's SHA256 then
	at  time.Time
}

// sessions is the server's session table; it is safe for concurrent use.
type sessions struct {
	mu      sync.Mutex
	m       map[[32]byte]*session
	checked map[string]keyCheck // key id → last lookup
}

func newSessions() *sessions {
	return &sessions{m: map[[32]byte]*session{}, checked: map[string]keyCheck{}}
}

// create stores a new session for k and returns the cookie value: 32
// random bytes, base64url.
func (ss *sessions) create(k Key, now time.Time) (string, time.Time, error) {
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", time.Time{}, err
	}
	value := base64.RawURLEncoding.EncodeToString(raw[:])
	exp := now.Add(SessionTTL)
	ss.mu.Lock()
	defer ss.mu.Unlock()
	// Sign-ins are rare: sweep the expired sessions and bound this key's.
	var mine []([32]byte)
	for h, s := range ss.m {
		switch {
		case !now.Before(s.expires):
			delete(ss.m, h)
		case s.key.ID == k.ID:
			mine = append(mine, h)
		}
	}
	for len(mine) >= maxSessionsPerKey {
		first := 0
		for i, h := range mine {
			if ss.m[h].expires.Before(ss.m[mine[first]].expires) {
				first = i
			}
		}
		delete(ss.m, mine[first])
		mine = append(mine[:first], mine[first+1:]...)
	}
	ss.m[sha256.Sum256([]byte(value))] = &session{key: k, expires: exp}
	ss.checked[k.ID] = keyCheck{sum: k.SHA256, at: now}
	return value, exp, nil
}

// end removes the session of cookie value, if any.
func (ss *sessions) end(value string) {
	ss.mu.Lock()
	delete(ss.m, sha256.Sum256([]byte(value)))
	ss.mu.Unlock()
}

// lookup returns the key of the session of cookie value. A session that
// is unknown, expired, or whose key is no longer in the store (looked up
// again when the last lookup is older than keyRecheck) is an authError;
// a failing store is returned as is and ends nothing.
func (ss *sessions) lookup(ctx context.Context, set store.Settings, value string, now time.Time) (Key, time.Time, error) {
	h := sha256.Sum256([]byte(value))
	ss.mu.Lock()
	s, ok := ss.m[h]
	if ok && !now.Before(s.expires) {
		delete(ss.m, h)
		ok = false
	}
	if !ok {
		ss.mu.Unlock()
		return Key{}, time.Time{}, authError("the session has ended (it expired, was signed out, or the server restarted): sign in again")
	}
	k, exp := s.key, s.expires
	c, fresh := ss.checked[k.ID]
	fresh = fresh && c.sum == k.SHA256 && now.Sub(c.at) < keyRecheck && !now.Before(c.at)
	ss.mu.Unlock()
	if fresh {
		return k, exp, nil
	}
	stored, err := storedKey(ctx, set, k.ID)
	if err != nil {
		return Key{}, time.Time{}, err
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if stored == nil || stored.SHA256 != k.SHA256 {
		// Revoked: end every session of the key.
		for h2, s2 := range ss.m {
			if s2.key.ID == k.ID {
				delete(ss.m, h2)
			}
		}
		delete(ss.checked, k.ID)
		return Key{}, time.Time{}, authError("the session's API key has been revoked: sign in again with another key")
	}
	ss.checked[k.ID] = keyCheck{sum: stored.SHA256, at: now}
	return *stored, exp, nil
}

// storedKey returns the stored key with id, or nil if there is none.
func storedKey(ctx context.Context, set store.Settings, id string) (*Key, error) {
	m, err := set.Settings(ctx, keyPrefix+id)
	if err != nil {
		return nil, err
	}
	v, ok := m[keyPrefix+id]
	if !ok {
		return nil, nil
	}
	var k Key
	if err := json.Unmarshal([]byte(v), &k); err != nil {
		return nil, fmt.Errorf("stored key %s is not readable: %v", id, err)
	}
	return &k, nil
}

// identity is who a request is authenticated as; it travels in the
// request's context from authorize to the handlers that need it.
type identity struct {
	key     Key
	session bool      // by the session cookie, not a Bearer key
	expires time.Time // the session's end
}

type identityKey struct{}

// sessionInfo is the JSON of GET and POST /api/v1/session.
type sessionInfo struct {
	KeysRequired bool       `json:"keys_required"`
	KeyID        string     `json:"key_id,omitempty"`
	Name         string     `json:"name,omitempty"`
	Scope        Scope      `json:"scope,omitempty"`
	Via          string     `json:"via,omitempty"` // "session" or "bearer"
	Expires      *time.Time `json:"expires,omitempty"`
}

func (id identity) info() sessionInfo {
	si := sessionInfo{KeysRequired: true, KeyID: id.key.ID, Name: id.key.Name, Scope: id.key.Scope, Via: "bearer"}
	if id.session {
		si.Via = "session"
		exp := id.expires.UTC()
		si.Expires = &exp
	}
	return si
}

// getSession answers who the request is authenticated as (wrap has
// authorized it as a reader); without RequireKeys, that keys are not
// required and anyone who reaches the server may read and delete.
func (s *Server) getSession(w http.ResponseWriter, r *http.Request) {
	id, ok := r.Context().Value(identityKey{}).(identity)
	if !s.o.RequireKeys || !ok {
		writeJSON(w, http.StatusOK, sessionInfo{KeysRequired: false})
		return
	}
	writeJSON(w, http.StatusOK, id.info())
}

// postSession signs in: {"key": "lk_…"}, a read or admin key, becomes a
// session cookie.
func (s *Server) postSession(w http.ResponseWriter, r *http.Request) {
	if !s.o.RequireKeys {
		writeError(w, http.StatusBadRequest, "this server does not require API keys: there is nothing to sign in to")
		return
	}
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		writeError(w, http.StatusUnsupportedMediaType, `send the key as JSON: Content-Type: application/json, {"key": "lk_…"}`)
		return
	}
	var body struct {
		Key string `json:"key"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxSessionBody)).Decode(&body); err != nil {
		writeError(w, http.StatusBadRequest, `the body is not {"key": "lk_…"}`)
		return
	}
	k, err := authenticate(r.Context(), s.keys, strings.TrimSpace(body.Key))
	if err != nil {
		var ae authError
		if errors.As(err, &ae) {
			writeError(w, http.StatusUnauthorized, err.Error())
		} else {
			s.storeError(w, r, err)
		}
		return
	}
	if k.Scope != ScopeRead && k.Scope != ScopeAdmin {
		writeError(w, http.StatusForbidden, fmt.Sprintf("API key %s has scope %s, which cannot sign in: sign in with a read or admin key", k.ID, k.Scope))
		return
	}
	now := s.now()
	value, exp, err := s.sessions.create(k, now)
	if err != nil {
		s.log.Error("loupe serve: making a session", "err", err)
		writeError(w, http.StatusInternalServerError, "internal error (logged by the server)")
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name: SessionCookie, Value: value, Path: "/",
		Expires: exp, MaxAge: int(SessionTTL / time.Second),
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: overTLS(r),
	})
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, identity{key: k, session: true, expires: exp}.info())
}

// deleteSession signs out: the session of the request's cookie ends, and
// the cookie is cleared. It answers 204 whether or not there was one.
func (s *Server) deleteSession(w http.ResponseWriter, r *http.Request) {
	if c, err := r.Cookie(SessionCookie); err == nil {
		s.sessions.end(c.Value)
	}
	clearSessionCookie(w, r)
	w.WriteHeader(http.StatusNoContent)
}

func clearSessionCookie(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{
		Name: SessionCookie, Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: overTLS(r),
	})
}

// overTLS reports whether the browser reached the server over TLS: its
// own, or a TLS-terminating proxy's that says so.
func overTLS(r *http.Request) bool {
	return r.TLS != nil || strings.EqualFold(strings.TrimSpace(r.Header.Get("X-Forwarded-Proto")), "https")
}
