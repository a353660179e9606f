package server

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"slices"
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
// earlier when its key is revoked or at sign-out, through any collector
// (a server confirms a session with the store at least every keyRecheck). Sessions are kept in the store's settings (the cookie's
// SHA-256, the key's id and the end; never the cookie), so every
// collector on a store knows every session and a restart signs no one
// out; each server also keeps the sessions it has seen in memory.
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
	seen    time.Time // when the store last confirmed it and its key
}

// sessions is the server's session table; it is safe for concurrent use.
type sessions struct {
	mu sync.Mutex
	m  map[[32]byte]*session
}

func newSessions() *sessions {
	return &sessions{m: map[[32]byte]*session{}}
}

// sessionPrefix namespaces the sessions in the store's settings; the
// rest of the setting's key is the cookie's SHA-256 in hex.
const sessionPrefix = "uisession:"

// storedSession is a session as the store's settings keep it.
type storedSession struct {
	KeyID   string    `json:"key_id"`
	Expires time.Time `json:"expires"`
}

// create stores a new session for k and returns the cookie value: 32
// random bytes, base64url. With set, the session is kept in the store
// too (and the store's expired sessions are swept), so that the other
// collectors on it accept the cookie.
func (ss *sessions) create(ctx context.Context, set store.Settings, k Key, now time.Time) (string, time.Time, error) {
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", time.Time{}, err
	}
	value := base64.RawURLEncoding.EncodeToString(raw[:])
	exp := now.Add(SessionTTL)
	h := sha256.Sum256([]byte(value))
	var ended [][32]byte // this key's sessions over the bound, ended in the store
	if set != nil {
		all, err := set.Settings(ctx, sessionPrefix)
		if err != nil {
			return "", time.Time{}, err
		}
		type mine struct {
			name string
			exp  time.Time
		}
		var ms []mine
		for name, v := range all {
			var st storedSession
			if json.Unmarshal([]byte(v), &st) != nil || !now.Before(st.Expires) {
				if _, err := set.DeleteSetting(ctx, name); err != nil {
					return "", time.Time{}, err
				}
			} else if st.KeyID == k.ID {
				ms = append(ms, mine{name, st.Expires})
			}
		}
		slices.SortFunc(ms, func(a, b mine) int { return a.exp.Compare(b.exp) })
		for len(ms) >= maxSessionsPerKey {
			if _, err := set.DeleteSetting(ctx, ms[0].name); err != nil {
				return "", time.Time{}, err
			}
			var eh [32]byte
			hex.Decode(eh[:], []byte(strings.TrimPrefix(ms[0].name, sessionPrefix)))
			ended = append(ended, eh)
			ms = ms[1:]
		}
		b, _ := json.Marshal(storedSession{KeyID: k.ID, Expires: exp})
		if err := set.PutSetting(ctx, sessionPrefix+hex.EncodeToString(h[:]), string(b)); err != nil {
			return "", time.Time{}, err
		}
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	for _, eh := range ended {
		delete(ss.m, eh)
	}
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
	ss.m[h] = &session{key: k, expires: exp, seen: now}
	return value, exp, nil
}

// end removes the session of cookie value, if any, here and in the store.
func (ss *sessions) end(ctx context.Context, set store.Settings, value string) error {
	h := sha256.Sum256([]byte(value))
	ss.mu.Lock()
	delete(ss.m, h)
	ss.mu.Unlock()
	if set == nil {
		return nil
	}
	_, err := set.DeleteSetting(ctx, sessionPrefix+hex.EncodeToString(h[:]))
	return err
}

// fromStore finds the session of hash h in the store and returns it with
// its key as stored now, or nil if the store has none that is still
// valid; revoked says the session was there but its key is no longer
// (the session is then removed from the store too).
func fromStore(ctx context.Context, set store.Settings, h [32]byte, now time.Time) (sess *session, revoked bool, err error) {
	if set == nil {
		return nil, false, nil
	}
	name := sessionPrefix + hex.EncodeToString(h[:])
	m, err := set.Settings(ctx, name)
	if err != nil {
		return nil, false, err
	}
	v, ok := m[name]
	if !ok {
		return nil, false, nil
	}
	var st storedSession
	if json.Unmarshal([]byte(v), &st) != nil || !now.Before(st.Expires) {
		return nil, false, nil
	}
	k, err := storedKey(ctx, set, st.KeyID)
	if err != nil {
		return nil, false, err
	}
	if k == nil {
		_, err := set.DeleteSetting(ctx, name)
		return nil, true, err
	}
	return &session{key: *k, expires: st.Expires}, false, nil
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
	if ok && (set == nil || now.Sub(s.seen) < keyRecheck && !now.Before(s.seen)) {
		k, exp := s.key, s.expires
		ss.mu.Unlock()
		return k, exp, nil
	}
	ss.mu.Unlock()
	// Not confirmed lately, or made elsewhere: the store knows of every
	// sign-in, sign-out and revocation, through any collector.
	found, revoked, err := fromStore(ctx, set, h, now)
	if err != nil {
		return Key{}, time.Time{}, err
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if found == nil {
		delete(ss.m, h)
		if revoked {
			return Key{}, time.Time{}, authError("the session's API key has been revoked: sign in again with another key")
		}
		return Key{}, time.Time{}, authError("the session has ended (it expired, was signed out, or its key was revoked): sign in again")
	}
	found.seen = now
	ss.m[h] = found
	return found.key, found.expires, nil
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
	value, exp, err := s.sessions.create(r.Context(), s.keys, k, now)
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
		if err := s.sessions.end(r.Context(), s.keys, c.Value); err != nil {
			s.storeError(w, r, err)
			return
		}
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
