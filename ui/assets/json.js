// A collapsible JSON view built from DOM nodes (text only). Long strings
// are folded behind a button that unfolds them in steps; Loupe's truncation marker
// {"$loupe":"truncated","bytes":N,"head":"…"} is shown as such.
import { el } from './dom.js';

const FOLD = 300;      // characters of a string shown before folding
const MAXKEYS = 200;   // members of an object or array shown before "… more"

/** jsonView renders a parsed JSON value. */
export function jsonView(v) {
  return el('div', { className: 'json' }, node(v, 0));
}

function node(v, depth) {
  if (v === null) return el('span', { className: 'l' }, 'null');
  if (typeof v === 'string') return str(v);
  if (typeof v === 'number' || typeof v === 'boolean') return el('span', { className: typeof v === 'number' ? 'n' : 'l' }, String(v));
  if (typeof v === 'object' && v['$loupe'] === 'truncated') {
    return el('span', {},
      el('span', { className: 'trunc', title: 'the recorder kept only the start of this value' },
        `[truncated: ${Number(v.bytes) || '?'} bytes recorded, head shown] `),
      str(String(v.head ?? '')));
  }
  const isArr = Array.isArray(v);
  const keys = isArr ? v.map((_, i) => i) : Object.keys(v);
  if (keys.length === 0) return el('span', {}, isArr ? '[]' : '{}');
  const d = el('details', { open: depth < 2 });
  d.appendChild(el('summary', {}, isArr ? `[${keys.length}]` : `{${keys.length}}`));
  for (const k of keys.slice(0, MAXKEYS)) {
    d.appendChild(el('div', {}, isArr ? '' : el('span', { className: 'k' }, JSON.stringify(String(k)).slice(0, 200) + ': '), node(v[k], depth + 1)));
  }
  if (keys.length > MAXKEYS) d.appendChild(el('div', { className: 'muted' }, `… ${keys.length - MAXKEYS} more`));
  return d;
}

const STEP = 100_000; // characters each "show more" adds: a page never lays out megabytes at once

function str(s) {
  if (s.length <= FOLD) return el('span', { className: 's' }, JSON.stringify(s));
  let shown = FOLD;
  const span = el('span', { className: 's' });
  const btn = el('button', { type: 'button', className: 'unfold' });
  const render = () => {
    const whole = shown >= s.length;
    span.textContent = whole ? JSON.stringify(s) : JSON.stringify(s.slice(0, shown)).slice(0, -1) + '…';
    if (whole) { btn.remove(); return; }
    const more = Math.min(STEP, s.length - shown);
    btn.textContent = `show ${more.toLocaleString('en')} more of ${s.length.toLocaleString('en')} chars`;
  };
  btn.addEventListener('click', () => { shown += STEP; render(); });
  render();
  return el('span', {}, span, ' ', btn);
}

/** parseValue parses a record's JSON value (already parsed by fetch, or a
 *  string when it is not JSON). */
export function parseValue(v) { return v; }
