// The dashboard (from /api/v1/aggregates, charts in SVG) and the
// evaluations pages (/api/v1/evaluations).
import { el, api, showError, clip, fmtDur, fmtCost, fmtInt, fmtTime } from './dom.js';
import { statusBadge } from './runs.js';
import { jsonView } from './json.js';

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

export function evaluationsPage(main) {
  const ctl = new AbortController();
  const tbody = el('tbody', { id: 'evals-body' });
  main.append(el('table', { className: 'grid', id: 'evals' },
    el('thead', {}, el('tr', {}, ['Evaluation run', 'Status', 'Started', 'Duration', 'Errors'].map(h => el('th', {}, h)))), tbody));
  api('/api/v1/evaluations?limit=200', ctl.signal).then(page => {
    for (const t of page.traces) {
      tbody.append(el('tr', { 'data-trace': t.trace_id },
        el('td', {}, el('a', { href: '#/evaluation/' + encodeURIComponent(t.trace_id) }, clip(t.name || t.trace_id, 80))),
        el('td', {}, statusBadge(t.status)), el('td', {}, fmtTime(t.started)), el('td', { className: 'num' }, fmtDur(t.duration_ns)),
        el('td', { className: 'num' }, String(t.errors))));
    }
    if (!page.traces.length) main.append(el('p', { className: 'muted', id: 'empty' }, 'No evaluation runs yet: run `loupe eval` with this store.'));
    main.dataset.loaded = 'true';
  }, e => { if (!ctl.signal.aborted) showError(e); });
  return () => ctl.abort();
}

export function evaluationPage(main, id) {
  const ctl = new AbortController();
  api('/api/v1/evaluations/' + encodeURIComponent(id), ctl.signal).then(ev => {
    const rows = ev.results || [];
    const passed = rows.filter(r => r.verdict === 'pass').length;
    main.append(el('div', { className: 'run-head' }, el('h1', {}, clip(ev.summary.name, 120)), statusBadge(ev.summary.status),
      el('span', {}, `${passed} of ${rows.length} cases pass`)));
    for (const r of rows) {
      const ok = r.verdict === 'pass';
      const box = el('div', { className: 'rec case', 'data-test': r.test_id, 'data-verdict': r.verdict });
      box.append(el('h3', {}, el('span', { className: 'badge ' + (ok ? 'ok' : 'bad') }, String(r.verdict)), ' ', clip(r.test_id, 200),
        el('span', { className: 'muted' }, ` score ${Number(r.score).toFixed(2)} (threshold ${r.threshold}, ${r.mode})`),
        r.trace_id ? el('a', { href: '#/run/' + encodeURIComponent(r.trace_id), className: 'tracelink' }, ' graded trace') : ''));
      if (r.error) box.append(el('div', { className: 'errtext' }, clip(r.error, 5000)));
      if (r.scores && r.scores.length) {
        box.append(el('table', { className: 'grid' }, el('thead', {}, el('tr', {}, ['Grader', 'Type', 'Score', 'Verdict', 'Why'].map(h => el('th', {}, h)))),
          el('tbody', {}, r.scores.map(s => el('tr', {}, el('td', {}, clip(s.name, 80)), el('td', {}, clip(s.type, 60)),
            el('td', { className: 'num' }, Number(s.score).toFixed(2)), el('td', {}, String(s.verdict)), el('td', { className: 'snippet' }, clip(s.reason, 2000)))))));
      }
      const failed = [...(r.assertions || []), ...(r.scores || []).flatMap(s => s.assertions || [])].filter(a => !a.passed && !a.skipped);
      if (r.metrics) box.append(el('div', { className: 'muted' }, `calls matched ${r.metrics.matched} of ${r.metrics.expected} expected (${r.metrics.actual} made) · precision ${r.metrics.precision.toFixed(2)} · recall ${r.metrics.recall.toFixed(2)} · order ${r.metrics.order.toFixed(2)}`));
      if (!ok) {
        // The actual trajectory beside what the graders expected of it
        // (each failed check names the call and argument that differed).
        const calls = (r.output || []).flatMap(m => m.tool_calls || []);
        box.append(el('div', { className: 'diff' },
          el('div', {}, el('h3', {}, 'Expected (failed checks)'),
            failed.length ? el('ol', { className: 'errtext expected' }, failed.map(a => el('li', {}, clip(a.text, 2000)))) : el('p', { className: 'muted' }, 'no failed check recorded')),
          el('div', {}, el('h3', {}, 'Actual tool calls'),
            calls.length ? el('ol', { className: 'actual' }, calls.map(c => el('li', {}, el('strong', {}, clip(c.tool, 100)), c.error ? el('span', { className: 'errtext' }, ' ' + clip(c.error, 500)) : '', jsonView(c.input ?? null)))) : el('p', { className: 'muted' }, 'no tool calls'))));
      }
      main.append(box);
    }
    main.dataset.loaded = 'true';
  }, e => { if (!ctl.signal.aborted) showError(e); });
  return () => ctl.abort();
}
