// The alerts page: the monitors of the store with their state and last
// value (/api/v1/monitors), and the firings, newest first, each with its
// webhook deliveries, a link to the runs of its window and filter, and
// links to the runs that caused it (/api/v1/alerts).
import { el, api, showError, clip, fmtTime } from './dom.js';

const STATE_CLASS = { ok: 'ok', firing: 'bad', resolving: 'warn', pending: 'warn', nodata: '', unknown: '', error: 'bad' };

// fmtValue writes a metric's value in its unit.
export function fmtValue(metric, v) {
  if (v === null || v === undefined) return '—';
  switch (metric) {
    case 'error_rate': case 'score_pass_rate': return (v * 100).toFixed(1) + '%';
    case 'p95_latency': return v.toFixed(v < 10 ? 2 : 0) + 's';
    case 'cost': return '$' + v.toFixed(v < 1 ? 4 : 2);
    case 'tokens': return Math.round(v).toLocaleString('en');
    default: return String(Math.round(v * 1e4) / 1e4);
  }
}

function fmtWindow(ns) {
  const s = ns / 1e9;
  if (s % 86400 === 0) return s / 86400 + 'd';
  if (s % 3600 === 0) return s / 3600 + 'h';
  if (s % 60 === 0) return s / 60 + 'm';
  return s + 's';
}

function stateBadge(state) {
  return el('span', { className: 'badge ' + (STATE_CLASS[state] || ''), 'data-state': state }, clip(state, 20));
}

function monitorRow(st) {
  const m = st.monitor;
  const op = m.op || '>';
  const resolve = m.resolve !== undefined && m.resolve !== null ? `, resolves past ${fmtValue(m.metric, m.resolve)}` : '';
  const metric = m.metric + (m.score ? ` (${m.score})` : '');
  return el('tr', { 'data-monitor': m.name },
    el('td', {}, clip(m.name, 80)),
    el('td', {}, stateBadge(st.state), st.error ? el('span', { className: 'errtext', title: clip(st.error, 2000) }, ' ' + clip(st.error, 80)) : ''),
    el('td', { className: 'num value' }, fmtValue(m.metric, st.value)),
    el('td', {}, clip(metric, 80)),
    el('td', {}, `${op} ${fmtValue(m.metric, m.threshold)}${resolve}` + (m.for > 1 ? ` for ${m.for}` : '')),
    el('td', {}, `${m.window} every ${m.every || '1m'}`),
    el('td', { className: 'muted' }, clip(m.filter || '', 80)),
    el('td', { className: 'muted' }, st.evaluated ? fmtTime(st.evaluated) : 'not yet'),
    el('td', { className: 'muted' }, (m.webhooks || []).map(h => clip(h.url, 60) + (h.format === 'slack' ? ' (slack)' : '')).join(', ')));
}

function deliveries(ds) {
  if (!ds.length) return el('span', { className: 'muted' }, 'none');
  return el('ol', { className: 'deliveries' }, ds.map(d => el('li', { 'data-ok': String(!!d.ok), 'data-attempt': d.attempt },
    el('span', { className: 'badge ' + (d.ok ? 'ok' : 'bad') }, d.ok ? 'delivered' : 'failed'), ' ',
    `${d.event} #${d.attempt} `, d.status ? `HTTP ${d.status} ` : 'no answer ',
    el('span', { className: 'muted' }, fmtTime(d.time) + ' ' + clip(d.target, 80)),
    d.error ? el('span', { className: 'errtext' }, ' ' + clip(d.error, 300)) : '')));
}

function firingRow(f) {
  const open = !f.resolved;
  return el('tr', { 'data-firing': f.id, 'data-monitor': f.monitor },
    el('td', {}, clip(f.monitor, 80)),
    el('td', {}, stateBadge(open ? 'firing' : 'resolved')),
    el('td', {}, fmtTime(f.started)),
    el('td', {}, open ? '' : fmtTime(f.resolved)),
    el('td', { className: 'num' }, `${fmtValue(f.metric, f.value)} (threshold ${fmtValue(f.metric, f.threshold)})`),
    el('td', {}, el('a', { href: f.runs_link, className: 'runslink', title: 'the runs of the window, with the monitor\'s filter' }, `runs of the ${fmtWindow(f.window_ns)} window`),
      ' ', (f.trace_ids || []).slice(0, 5).map((id, i) => el('a', { href: '#/run/' + encodeURIComponent(id), className: 'tracelink', title: id }, (i ? ' ' : '') + id.slice(0, 8)))),
    el('td', {}, deliveries(f.deliveries || [])));
}

export function alertsPage(main) {
  const ctl = new AbortController();
  const mbody = el('tbody', { id: 'monitors-body' });
  const fbody = el('tbody', { id: 'firings-body' });
  main.append(
    el('h2', {}, 'Monitors'),
    el('table', { className: 'grid', id: 'monitors' },
      el('thead', {}, el('tr', {}, ['Monitor', 'State', 'Value', 'Metric', 'Condition', 'Window', 'Filter', 'Evaluated', 'Webhooks'].map(h => el('th', { className: h === 'Value' ? 'num' : '' }, h)))), mbody),
    el('p', { className: 'muted', id: 'no-monitors', hidden: true }, 'No monitors: start loupe serve with --monitors monitors.yaml, or POST one to /api/v1/monitors.'),
    el('h2', {}, 'Firings'),
    el('table', { className: 'grid', id: 'firings' },
      el('thead', {}, el('tr', {}, ['Monitor', 'State', 'Fired', 'Resolved', 'Value', 'Runs', 'Deliveries'].map(h => el('th', {}, h)))), fbody),
    el('p', { className: 'muted', id: 'no-firings', hidden: true }, 'No monitor has fired.'));
  const load = async () => {
    try {
      const [ms, fs] = await Promise.all([api('/api/v1/monitors', ctl.signal), api('/api/v1/alerts?limit=200', ctl.signal)]);
      mbody.replaceChildren(...ms.monitors.map(monitorRow));
      fbody.replaceChildren(...fs.firings.map(firingRow));
      document.getElementById('no-monitors').hidden = ms.monitors.length > 0;
      document.getElementById('no-firings').hidden = fs.firings.length > 0;
      main.dataset.loaded = 'true';
    } catch (e) { if (!ctl.signal.aborted) showError(e); }
  };
  load();
  const timer = setInterval(load, 15000); // states change as monitors are evaluated
  return () => { ctl.abort(); clearInterval(timer); };
}
