// DOM helpers. Everything from traces is untrusted: it reaches the page
// only as text nodes (createTextNode / textContent), never as HTML.

/** el builds an element: attrs sets properties (className, href, …) and
 *  data-* attributes; children are nodes or strings (made text nodes). */
export function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  if (attrs) {
    for (const [k, v] of Object.entries(attrs)) {
      if (v === undefined || v === null || v === false) continue;
      if (k === 'href') e.setAttribute('href', safeHref(v));
      else if (k.startsWith('data-') || k === 'title' || k === 'role' || k === 'tabindex' || k.startsWith('aria-')) e.setAttribute(k, String(v));
      else if (k === 'on') for (const [ev, f] of Object.entries(v)) e.addEventListener(ev, f);
      else e[k] = v;
    }
  }
  for (const c of children) add(e, c);
  return e;
}

function add(e, c) {
  if (c === undefined || c === null || c === false) return;
  if (Array.isArray(c)) { for (const x of c) add(e, x); return; }
  e.appendChild(c instanceof Node ? c : document.createTextNode(String(c)));
}

/** safeHref allows only the UI's own links (hash routes and same-origin
 *  paths); anything else (javascript:, data:, other sites) becomes "#". */
export function safeHref(h) {
  h = String(h);
  return (h.startsWith('#') || (h.startsWith('/') && !h.startsWith('//'))) ? h : '#';
}

/** clip shortens s for one-line display (names may be megabytes). */
export function clip(s, n = 200) {
  s = s == null ? '' : String(s);
  return s.length > n ? s.slice(0, n) + '…' : s;
}

export function fmtDur(ns) {
  if (ns == null) return '';
  const ms = ns / 1e6;
  if (ms < 1) return (ns / 1e3).toFixed(0) + 'µs';
  if (ms < 1000) return ms.toFixed(ms < 10 ? 2 : 0) + 'ms';
  const s = ms / 1000;
  if (s < 60) return s.toFixed(2) + 's';
  return Math.floor(s / 60) + 'm' + Math.round(s % 60) + 's';
}

// fmtCost writes a cost: unpriced counts the calls whose model has no
// price (their cost is unknown), so the cost reads "$0.012 + ?" or
// "unknown", never $0.
export function fmtCost(c, unpriced) {
  const known = c ? '$' + c.toFixed(c < 0.01 ? 5 : 3) : '';
  if (!unpriced) return known;
  return known ? known + ' + ?' : 'unknown';
}
export function fmtInt(n) { return n ? n.toLocaleString('en') : '0'; }
export function fmtTime(t) {
  const d = new Date(t);
  return isNaN(d) ? '' : d.toLocaleString();
}

/** parseTime reads an RFC 3339 time with up to nanosecond digits into
 *  milliseconds since the epoch, keeping the sub-millisecond part. */
export function parseTime(s) {
  const m = /^(.*?T\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)$/.exec(s || '');
  if (!m) return Date.parse(s) || 0;
  const base = Date.parse(m[1] + m[3]);
  const frac = m[2] ? Number('0.' + m[2]) * 1000 : 0;
  return base + frac;
}

/** api fetches a JSON API path (GET, or method) and throws an Error with
 *  the server's message on failure. A 401 (no session, or it ended) also
 *  tells the application to show the sign-in form (event
 *  "loupe:unauthorized"). */
export async function api(path, signal, method) {
  const r = await fetch(path, { signal, method: method || 'GET', headers: { Accept: 'application/json' } });
  let body;
  try { body = await r.json(); } catch { body = null; }
  const msg = (body && body.error) || `${path}: HTTP ${r.status}`;
  if (r.status === 401) window.dispatchEvent(new CustomEvent('loupe:unauthorized', { detail: msg }));
  if (!r.ok) throw new Error(msg);
  return body;
}

/** watchStream reports a live stream the server refused for good (a
 *  session that ended answers 401, and EventSource gives up): the
 *  application then asks whether it is still signed in. */
export function watchStream(es) {
  es.addEventListener('error', () => {
    if (es.readyState === EventSource.CLOSED) window.dispatchEvent(new CustomEvent('loupe:stream-closed'));
  });
  return es;
}

export function showError(err) {
  const box = document.getElementById('error');
  if (!err) { box.hidden = true; box.textContent = ''; return; }
  box.textContent = String(err.message || err);
  box.hidden = false;
}
