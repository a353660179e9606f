// The evaluations pages: the list of loupe eval runs
// (/api/v1/evaluations) and one run's case results.
import { el, api, showError, clip, fmtDur, fmtTime } from './dom.js';
import { statusBadge } from './runs.js';
import { jsonView } from './json.js';

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
