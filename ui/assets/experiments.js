// The experiments pages: the list of experiments (/api/v1/experiments),
// the comparison of two (/api/v1/experiments/compare: regressions first,
// then fixes, then unchanged; totals with deltas), whose cases open their
// two runs side by side on the compare page (#/compare/<a>/<b>).
import { el, api, showError, clip, fmtDur, fmtTime } from './dom.js';

const pct = f => (100 * f).toFixed(1) + '%';
const signed = (f, d) => (f > 0 ? '+' : '') + f.toFixed(d);

export function experimentsPage(main, params) {
  const ctl = new AbortController();
  const ds = params.get('dataset') || '';
  const tbody = el('tbody', { id: 'experiments-body' });
  const a = el('select', { name: 'a', id: 'compare-a' }), b = el('select', { name: 'b', id: 'compare-b' });
  const go = el('button', { type: 'submit', id: 'compare-go' }, 'Compare');
  const form = el('form', { className: 'filters', id: 'compare-form' }, 'Compare ', b, ' with the baseline ', a, go);
  form.addEventListener('submit', ev => {
    ev.preventDefault();
    location.hash = '#/compare?a=' + encodeURIComponent(a.value) + '&b=' + encodeURIComponent(b.value);
  });
  main.append(el('h1', {}, ds ? `Experiments of ${clip(ds, 80)}` : 'Experiments'), form,
    el('table', { className: 'grid', id: 'experiments' },
      el('thead', {}, el('tr', {}, ['Experiment', 'Dataset', 'Created', 'Cases', 'Pass rate', 'Mean score', 'Cost', 'p50', 'p95'].map(h => el('th', {}, h)))), tbody));
  api('/api/v1/experiments' + (ds ? '?dataset=' + encodeURIComponent(ds) : ''), ctl.signal).then(page => {
    const list = page.experiments || [];
    for (const e of list) {
      const s = e.summary;
      tbody.append(el('tr', { 'data-experiment': e.name },
        el('td', {}, clip(e.name, 120)), el('td', {}, el('a', { href: '#/dataset/' + encodeURIComponent(e.dataset) + '?version=' + e.version }, `${clip(e.dataset, 80)}@${e.version}`)),
        el('td', {}, fmtTime(e.created)), el('td', { className: 'num' }, String(s.cases)), el('td', { className: 'num' }, pct(s.pass_rate)),
        el('td', { className: 'num' }, s.mean_score.toFixed(3)), el('td', { className: 'num' }, '$' + s.cost_usd.toFixed(4)),
        el('td', { className: 'num' }, fmtDur(s.p50_ms * 1e6)), el('td', { className: 'num' }, fmtDur(s.p95_ms * 1e6))));
      a.append(el('option', { value: e.name }, clip(e.name, 80)));
      b.append(el('option', { value: e.name }, clip(e.name, 80)));
    }
    // Newest first: compare the newest with the one before it.
    if (list.length > 1) { b.value = list[0].name; a.value = list[1].name; }
    go.disabled = list.length < 2;
    if (!list.length) main.append(el('p', { className: 'muted', id: 'empty' }, 'No experiments yet: run `loupe eval --dataset NAME …` with this store.'));
    main.dataset.loaded = 'true';
  }, e => { if (!ctl.signal.aborted) showError(e); });
  return () => ctl.abort();
}

function cell(r) {
  if (!r) return el('td', { className: 'muted' }, '—');
  return el('td', {}, el('span', { className: 'badge ' + (r.verdict === 'pass' ? 'ok' : 'bad') }, r.verdict), ' ', r.score.toFixed(2));
}

export function comparePage(main, params) {
  const ctl = new AbortController();
  const a = params.get('a') || '', b = params.get('b') || '';
  api('/api/v1/experiments/compare?a=' + encodeURIComponent(a) + '&b=' + encodeURIComponent(b), ctl.signal).then(c => {
    main.append(el('div', { className: 'run-head' }, el('h1', {}, `${clip(c.b, 80)} against ${clip(c.a, 80)}`),
      el('span', { className: 'badge ' + (c.regressions ? 'bad' : 'ok'), id: 'regressions' }, `${c.regressions} regression(s)`),
      el('span', { className: 'muted' }, `${c.fixes} fix(es) · ${c.unchanged} unchanged · ${clip(c.dataset_a, 80)} → ${clip(c.dataset_b, 80)}`)));
    const sa = c.summary_a, sb = c.summary_b, d = c.delta;
    main.append(el('table', { className: 'grid totals', id: 'totals' },
      el('thead', {}, el('tr', {}, ['', 'Baseline', 'This', 'Change'].map(h => el('th', {}, h)))),
      el('tbody', {},
        el('tr', {}, el('td', {}, 'pass rate'), el('td', {}, `${pct(sa.pass_rate)} (${sa.passed}/${sa.cases})`), el('td', {}, `${pct(sb.pass_rate)} (${sb.passed}/${sb.cases})`), el('td', {}, signed(100 * d.pass_rate, 1) + ' pts')),
        el('tr', {}, el('td', {}, 'mean score'), el('td', {}, sa.mean_score.toFixed(3)), el('td', {}, sb.mean_score.toFixed(3)), el('td', {}, signed(d.mean_score, 3))),
        el('tr', {}, el('td', {}, 'cost'), el('td', {}, '$' + sa.cost_usd.toFixed(4)), el('td', {}, '$' + sb.cost_usd.toFixed(4)), el('td', {}, signed(d.cost_usd, 4))),
        el('tr', {}, el('td', {}, 'latency p50'), el('td', {}, fmtDur(sa.p50_ms * 1e6)), el('td', {}, fmtDur(sb.p50_ms * 1e6)), el('td', {}, signed(d.p50_ms, 1) + ' ms')),
        el('tr', {}, el('td', {}, 'latency p95'), el('td', {}, fmtDur(sa.p95_ms * 1e6)), el('td', {}, fmtDur(sb.p95_ms * 1e6)), el('td', {}, signed(d.p95_ms, 1) + ' ms')))));
    const tbody = el('tbody', {});
    for (const r of c.rows) {
      const both = r.a && r.b && r.a.trace && r.b.trace;
      const tr = el('tr', { className: 'change-' + r.change + (both ? ' clickable' : ''), 'data-case': r.id, 'data-change': r.change, title: both ? 'open both runs side by side' : '' },
        el('td', {}, el('span', { className: 'badge ' + (r.change === 'regression' ? 'bad' : r.change === 'fix' ? 'ok' : '') }, r.change)),
        el('td', {}, clip(r.id, 120)), cell(r.a), cell(r.b), el('td', { className: 'num' }, signed(r.score_delta, 2)));
      if (both) tr.addEventListener('click', () => { location.hash = '#/compare/' + encodeURIComponent(r.a.trace) + '/' + encodeURIComponent(r.b.trace); });
      tbody.append(tr);
    }
    main.append(el('table', { className: 'grid', id: 'compare-rows' },
      el('thead', {}, el('tr', {}, ['Change', 'Case', clip(c.a, 40), clip(c.b, 40), 'Score change'].map(h => el('th', {}, h)))), tbody));
    main.dataset.loaded = 'true';
  }, e => { if (!ctl.signal.aborted) showError(e); });
  return () => ctl.abort();
}
