// The dashboard (from /api/v1/aggregates, charts in SVG).
import { el, api, showError, clip, fmtDur, fmtCost, fmtInt } from './dom.js';
import { scoreCharts } from './scores.js';

const SVG = 'http://www.w3.org/2000/svg';

// svg builds an SVG element; attribute values are numbers and class
// names computed here, text is set as textContent.
function svg(tag, attrs, text) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
  if (text !== undefined) e.textContent = String(text);
  return e;
}

const RANGES = { '1h': 60, '24h': 1440, '7d': 10080, '30d': 43200 }; // minutes
const BUCKETS = 12;

export function dashboardPage(main, params) {
  const ctl = new AbortController();
  const range = RANGES[params.get('range')] ? params.get('range') : '24h';
  const sel = el('select', { id: 'range' }, Object.keys(RANGES).map(r => el('option', { value: r, selected: r === range }, 'last ' + r)));
  sel.addEventListener('change', () => { location.hash = '#/dashboard?range=' + sel.value; });
  const totals = el('div', { className: 'run-head', id: 'totals' });
  const charts = el('div', { className: 'charts', id: 'charts' });
  main.append(el('div', { className: 'filters' }, el('strong', {}, 'Dashboard'), sel), totals, charts);
  (async () => {
    const mins = RANGES[range], step = mins / BUCKETS;
    const all = api('/api/v1/aggregates?since=' + mins + 'm', ctl.signal);
    all.catch(() => {}); // awaited below, after the buckets: if they fail first, this must not be an unhandled rejection
    const buckets = await Promise.all([...Array(BUCKETS).keys()].map(i => {
      const since = Math.round(mins - i * step), until = Math.round(mins - (i + 1) * step);
      return api(`/api/v1/aggregates?since=${since}m` + (until > 0 ? `&until=${until}m` : ''), ctl.signal);
    }));
    const a = await all;
    totals.append(el('span', {}, `${fmtInt(a.traces)} runs`), el('span', {}, `${fmtInt(a.records)} records`),
      el('span', { className: a.error_traces ? 'badge bad' : 'badge ok' }, `error rate ${(a.error_rate * 100).toFixed(1)}%`),
      a.incomplete ? el('span', { className: 'badge warn' }, `${a.incomplete} incomplete, ${a.lost_records} records lost`) : '');
    const labels = buckets.map((_, i) => '-' + fmtDur((mins - i * step) * 60e9));
    charts.append(
      chart('Runs and runs with errors over time', columns(buckets.map(b => b.traces), buckets.map(b => b.error_traces), labels)),
      chart('Cost by model', hbars(Object.entries(a.by_model || {}).map(([k, v]) => [k, v.cost_usd, fmtCost(v.cost_usd, v.unpriced_calls) + ` · ${fmtInt(v.input_tokens + v.output_tokens)} tokens`]))),
      chart('Tokens by model', hbars(Object.entries(a.by_model || {}).map(([k, v]) => [k, v.input_tokens + v.output_tokens, `${fmtInt(v.input_tokens)} in · ${fmtInt(v.output_tokens)} out`]))),
      chart('Slowest tools (mean duration)', hbars(Object.entries(a.by_tool || {}).map(([k, v]) => [k, v.calls ? v.total_ns / v.calls : 0, fmtDur(v.calls ? v.total_ns / v.calls : 0) + ` · ${v.calls} calls`]))),
      chart('Most-failing tools', hbars(Object.entries(a.by_tool || {}).filter(([, v]) => v.errors).map(([k, v]) => [k, v.errors, `${v.errors} of ${v.calls} calls`]), true)));
    await scoreCharts(charts, mins, ctl.signal, { columns, hbars });
    main.dataset.loaded = 'true';
  })().catch(e => { if (!ctl.signal.aborted) showError(e); });
  return () => ctl.abort();
}

function chart(title, body) { return el('div', { className: 'chart' }, el('h3', {}, title), body); }

// columns draws a bar per bucket (all runs) with the error part over it.
function columns(vals, bad, labels) {
  const W = 480, H = 180, pad = 24, max = Math.max(1, ...vals);
  const g = svg('svg', { viewBox: `0 0 ${W} ${H + 30}`, width: '100%', role: 'img', class: 'colchart' });
  const bw = (W - pad) / vals.length;
  vals.forEach((v, i) => {
    const h = v / max * H, hb = (bad[i] || 0) / max * H, x = pad + i * bw;
    g.append(svg('rect', { x: x + 2, y: H - h, width: bw - 4, height: h, class: 'barrect' }));
    if (hb) g.append(svg('rect', { x: x + 2, y: H - hb, width: bw - 4, height: hb, class: 'barbad' }));
    if (v) g.append(svg('text', { x: x + bw / 2, y: H - h - 3, 'text-anchor': 'middle' }, v));
    if (i % 3 === 0) g.append(svg('text', { x: x + 2, y: H + 14 }, labels[i]));
  });
  g.append(svg('text', { x: 0, y: 10 }, max));
  return g;
}

// hbars draws one horizontal bar per [name, value, label], largest first.
function hbars(rows, bad) {
  rows = rows.filter(r => r[1] > 0).sort((a, b) => b[1] - a[1]).slice(0, 10);
  if (!rows.length) return el('p', { className: 'muted' }, 'nothing in this range');
  const W = 480, RH = 22, max = Math.max(...rows.map(r => r[1]));
  const g = svg('svg', { viewBox: `0 0 ${W} ${rows.length * RH}`, width: '100%', role: 'img' });
  rows.forEach(([name, v, label], i) => {
    g.append(svg('rect', { x: 140, y: i * RH + 4, width: Math.max(1, v / max * 200), height: RH - 8, class: bad ? 'barbad' : 'barrect' }));
    g.append(svg('text', { x: 0, y: i * RH + 15 }, clip(name, 22)));
    g.append(svg('text', { x: 346, y: i * RH + 15 }, label));
  });
  return g;
}
