// A collapsible JSON view built from DOM nodes (text only). Long strings
// are folded behind a button; Loupe's truncation marker
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

function str(s) {
  if (s.length <= FOLD) return el('span', { className: 's' }, JSON.stringify(s));
  const span = el('span', { className: 's' }, JSON.stringify(s.slice(0, FOLD)).slice(0, -1) + '…');
  const btn = el('button', { type: 'button', className: 'unfold' }, `show all ${s.length.toLocaleString('en')} chars`);
  btn.addEventListener('click', () => { span.textContent = JSON.stringify(s); btn.remove(); });
  return el('span', {}, span, ' ', btn);
}

/** parseValue parses a record's JSON value (already parsed by fetch, or a
 *  string when it is not JSON). */
export function parseValue(v) { return v; }
