// Signing in to a collector that requires API keys. GET /api/v1/session
// says who this browser is; a 401 from it (or from any API call, see
// dom.js) shows the sign-in form, which exchanges a read or admin key for
// a session cookie. The cookie is HttpOnly: this code never sees it, and
// the key is not kept anywhere once the form is sent.
import { el, clip } from './dom.js';

let who = null; // the answer of GET /api/v1/session, or null when signed out

/** whoAmI asks the server who this browser is: the session (or
 *  {keys_required: false} when the server needs no key), or null when it
 *  must sign in. */
export async function whoAmI() {
  const r = await fetch('/api/v1/session', { headers: { Accept: 'application/json' } });
  if (r.status === 401) { who = null; return null; }
  let body = null;
  try { body = await r.json(); } catch { /* not JSON */ }
  if (!r.ok) throw new Error((body && body.error) || `/api/v1/session: HTTP ${r.status}`);
  who = body;
  return who;
}

/** canDelete says whether to offer deletion: admin keys only, or anyone
 *  when the server needs no key. The server refuses the others anyway. */
export function canDelete() {
  return !!who && (!who.keys_required || who.scope === 'admin');
}

/** whoLabel is the header's text: the key's name and scope. */
export function whoLabel(w) {
  return w && w.keys_required ? `${clip(w.name || w.key_id, 60)} (${w.scope})` : '';
}

/** signOut ends the session on the server (and its cookie). */
export async function signOut() {
  who = null;
  await fetch('/api/v1/session', { method: 'DELETE' });
}

/** signInForm asks for a key; onDone gets the new session. */
export function signInForm(onDone, message) {
  const input = el('input', { type: 'password', name: 'key', id: 'signin-key', autocomplete: 'off', placeholder: 'lk_…', size: 64, required: true });
  const err = el('p', { className: 'errtext', id: 'signin-error', hidden: !message }, message || '');
  const button = el('button', { type: 'submit', id: 'signin-submit' }, 'Sign in');
  const f = el('form', { className: 'signin', id: 'signin' },
    el('h1', {}, 'Sign in'),
    el('p', { className: 'muted' }, 'This collector requires an API key. Enter a read or admin key (loupe keys create --scope read): the browser gets a session for 12 hours and does not keep the key.'),
    el('label', {}, 'API key ', input), ' ', button, err);
  f.addEventListener('submit', async e => {
    e.preventDefault();
    button.disabled = true;
    try {
      const r = await fetch('/api/v1/session', {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', Accept: 'application/json' },
        body: JSON.stringify({ key: input.value.trim() }),
      });
      let body = null;
      try { body = await r.json(); } catch { /* not JSON */ }
      if (!r.ok) throw new Error((body && body.error) || `sign-in: HTTP ${r.status}`);
      input.value = '';
      who = body;
      onDone(body);
    } catch (ex) {
      err.textContent = String(ex.message || ex);
      err.hidden = false;
    } finally {
      button.disabled = false;
    }
  });
  setTimeout(() => input.focus(), 0);
  return f;
}
