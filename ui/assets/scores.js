// Scores in the UI: the API calls, how a score's value reads, the score
// columns of the runs list and the score charts of the dashboard. The
// run page's annotation panel is annotate.js. Score names, categories,
// comments and authors come from clients: they reach the page as text
// only (dom.js).
import { el, api, clip, fmtTime } from './dom.js';

/** send calls a JSON API path with a JSON body (POST, PUT) and throws an
 *  Error with the server's message (naming the field at fault) on
 *  failure; a 401 asks the application to sign in again, as api does. */
export async function send(path, method, body, signal) {
  const r = await fetch(path, {
    method, signal, body: JSON.stringify(body),
    headers: { Accept: 'application/json', 'Content-Type': 'application/json' },
  });
  let b;
  try { b = await r.json(); } catch { b = null; }
  const msg = (b && b.error) || `${path}: HTTP ${r.status}`;
  if (r.status === 401) window.dispatchEvent(new CustomEvent('loupe:unauthorized', { detail: msg }));
  if (!r.ok) throw new Error(msg);
  return b;
}

/** addScore stores one score (source human: a person gave it here). */
export function addScore(score, signal) {
  return send('/api/v1/scores', 'POST', { scores: [{ source: 'human', ...score }] }, signal);
}

/** scoresOf returns every score of the traces (up to 1000 a page, all
 *  pages), optionally of one name. */
export async function scoresOf(traceIDs, name, signal) {
  const out = [];
  let cursor = '';
  for (let pages = 0; pages < 20; pages++) {
    const q = new URLSearchParams();
    for (const id of traceIDs) q.append('trace', id);
    if (name) q.set('name', name);
    q.set('limit', '1000');
    if (cursor) q.set('cursor', cursor);
    const p = await api('/api/v1/scores?' + q, signal);
    out.push(...p.scores);
    cursor = p.next || '';
    if (!cursor) break;
  }
  return out;
}

/** configs returns the score configs, by name. */
export async function configs(signal) {
  const r = await api('/api/v1/score-configs', signal);
  return new Map((r.configs || []).map(c => [c.name, c]));
}

/** valueText is how a score's value reads: true/false, the number, or
 *  the category. */
export function valueText(s) {
  if (s.kind === 'boolean') return s.value ? 'true' : 'false';
  if (s.kind === 'categorical') return clip(s.category, 60);
  return String(Math.round(s.value * 1000) / 1000);
}

/** summary reads several scores of one name as one cell: the mean of
 *  numbers (with how many), the share of true, the commonest category. */
export function summary(list) {
  if (!list.length) return '';
  const n = list.length > 1 ? ` (${list.length})` : '';
  const k = list[0].kind;
  if (k === 'categorical') {
    const counts = new Map();
    for (const s of list) counts.set(s.category, (counts.get(s.category) || 0) + 1);
    const top = [...counts].sort((a, b) => b[1] - a[1])[0][0];
    return clip(top, 40) + n;
  }
  const mean = list.reduce((a, s) => a + s.value, 0) / list.length;
  if (k === 'boolean') return list.length === 1 ? valueText(list[0]) : `${Math.round(mean * 100)}% true${n}`;
  return String(Math.round(mean * 1000) / 1000) + n;
}

const COLS_KEY = 'loupe-score-columns';

/** scoreColumns returns the score names the runs list shows as columns
 *  (kept in this browser). */
export function scoreColumns() {
  return (localStorage.getItem(COLS_KEY) || '').split(',').map(s => s.trim()).filter(Boolean).slice(0, 8);
}

/** columnsPicker is the runs page's field that chooses the score
 *  columns: names separated by commas. */
export function columnsPicker() {
  const inp = el('input', { id: 'score-columns', name: 'score-columns', placeholder: 'score columns (thumbs, helpfulness)', value: scoreColumns().join(', '), size: 22, title: 'score names to show as columns, separated by commas' });
  inp.addEventListener('change', () => {
    localStorage.setItem(COLS_KEY, inp.value);
    window.dispatchEvent(new HashChangeEvent('hashchange'));
  });
  return inp;
}

/** fillScoreColumns adds a header cell per chosen score name to table
 *  and fills the rows (tr[data-trace]) without their score cells yet. */
export async function fillScoreColumns(table, signal) {
  const names = scoreColumns();
  if (!names.length) return;
  const head = table.tHead.rows[0];
  if (!head.querySelector('th.score')) for (const n of names) head.append(el('th', { className: 'score num', 'data-score': n }, clip(n, 30)));
  const rows = [...table.tBodies[0].rows].filter(r => !r.dataset.scored);
  if (!rows.length) return;
  for (const r of rows) { r.dataset.scored = 'true'; for (const n of names) r.append(el('td', { className: 'num score', 'data-score': n })); }
  const ids = rows.map(r => r.dataset.trace);
  for (let i = 0; i < ids.length; i += 100) {
    const chunk = ids.slice(i, i + 100);
    for (const n of names) {
      const got = await scoresOf(chunk, n, signal);
      const by = new Map();
      for (const s of got) { const l = by.get(s.trace_id) || []; l.push(s); by.set(s.trace_id, l); }
      for (const r of rows.slice(i, i + 100)) {
        const cell = [...r.cells].find(c => c.dataset.score === n);
        if (cell) cell.textContent = summary(by.get(r.dataset.trace) || []);
      }
    }
  }
  table.dataset.scores = 'filled';
}

/** scoreCharts appends, for each score name, its distribution and the
 *  trend of its mean over the range (minutes before now) to charts. The
 *  dashboard lends its drawing functions (chart, columns, hbars). */
export async function scoreCharts(charts, mins, signal, draw) {
  const r = await api(`/api/v1/scores/stats?since=${mins}m`, signal);
  for (const st of r.scores || []) {
    let dist;
    if (st.kind === 'numeric') {
      const w = (st.max - st.min) / (st.histogram || []).length;
      dist = draw.columns(st.histogram || [], [], (st.histogram || []).map((_, i) => String(Math.round((st.min + i * w) * 100) / 100)));
    } else {
      dist = draw.hbars(Object.entries(st.categories || {}).map(([k, v]) => [k, v, `${v} (${Math.round(v / st.count * 100)}%)`]));
    }
    const mean = st.kind === 'categorical' ? '' : ` · mean ${Math.round(st.mean * 1000) / 1000}`;
    const box = el('div', { className: 'chart score-chart', 'data-score': st.name },
      el('h3', {}, `Score ${clip(st.name, 60)} (${st.kind}): ${st.count} scores${mean}`), dist);
    if (st.kind !== 'categorical' && (st.trend || []).length) box.append(el('h3', {}, 'Mean over time'), trendLine(st.trend));
    charts.append(box);
  }
}

const SVG = 'http://www.w3.org/2000/svg';
function svg(tag, attrs, text) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
  if (text !== undefined) e.textContent = String(text);
  return e;
}

// trendLine draws the mean per bucket as a line with a dot per bucket.
function trendLine(trend) {
  const W = 480, H = 120, pad = 30;
  const ts = trend.map(b => Date.parse(b.start)), vs = trend.map(b => b.mean);
  const t0 = Math.min(...ts), t1 = Math.max(...ts), lo = Math.min(0, ...vs), hi = Math.max(1e-9, ...vs);
  const x = t => pad + (t1 > t0 ? (t - t0) / (t1 - t0) : 0.5) * (W - pad - 10);
  const y = v => 10 + (1 - (v - lo) / (hi - lo || 1)) * (H - 20);
  const g = svg('svg', { viewBox: `0 0 ${W} ${H + 18}`, width: '100%', role: 'img', class: 'trend' });
  g.append(svg('polyline', { points: trend.map((b, i) => `${x(ts[i])},${y(vs[i])}`).join(' '), class: 'trendline' }));
  trend.forEach((b, i) => {
    const c = svg('circle', { cx: x(ts[i]), cy: y(vs[i]), r: 3, class: 'trenddot' });
    c.append(svg('title', {}, `${fmtTime(b.start)}: mean ${Math.round(b.mean * 1000) / 1000} of ${b.count}`));
    g.append(c);
  });
  g.append(svg('text', { x: 0, y: 12 }, Math.round(hi * 100) / 100), svg('text', { x: 0, y: H }, Math.round(lo * 100) / 100));
  g.append(svg('text', { x: pad, y: H + 14 }, fmtTime(trend[0].start)));
  return g;
}
