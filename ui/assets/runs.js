// The runs page: the table of traces with filters, the search language of
// `loupe traces search` (/api/v1/search), cursor pagination and new runs
// arriving live from /api/v1/stream.
import { el, api, showError, watchStream, clip, fmtDur, fmtCost, fmtInt, fmtTime } from './dom.js';
import { sessionLink } from './sessions.js';
import { columnsPicker, fillScoreColumns } from './scores.js';

const FILTERS = ['status', 'name', 'tag', 'model', 'tool', 'since', 'until', 'errors', 'session', 'user', 'score'];

export function statusBadge(s) {
  const cls = s === 'success' ? 'ok' : s === 'running' ? 'live' : s === 'incomplete' ? 'warn' : 'bad';
  return el('span', { className: 'badge ' + cls, 'data-status': s }, s === 'running' ? '● running' : clip(s, 40));
}

function row(t) {
  const tokens = (t.input_tokens || 0) + (t.output_tokens || 0);
  const lost = [t.lost_records ? `${t.lost_records} lost` : '', t.incomplete ? 'incomplete' : ''].filter(Boolean).join(', ');
  return el('tr', { 'data-trace': t.trace_id },
    el('td', {}, el('a', { href: '#/run/' + encodeURIComponent(t.trace_id), className: 'runlink', title: clip(t.name, 1000) }, clip(t.name || '(unnamed)', 80)),
      t.session ? [' ', el('span', { className: 'session-tag' }, '⤷ ', sessionLink(t.session))] : ''),
    el('td', {}, statusBadge(t.status)),
    el('td', {}, fmtTime(t.started)),
    el('td', { className: 'num' }, fmtDur(t.duration_ns)),
    el('td', { className: 'num' }, fmtInt(t.iterations)),
    el('td', { className: 'num' }, fmtInt(t.tool_calls)),
    el('td', { className: 'num', title: `${t.input_tokens} in, ${t.output_tokens} out` }, fmtInt(tokens)),
    el('td', { className: 'num' }, fmtCost(t.cost_usd, t.unpriced_calls)),
    el('td', { className: 'num' + (t.errors ? ' errors' : '') }, t.errors ? el('span', { className: 'badge bad' }, String(t.errors)) : '0'),
    el('td', {}, lost ? el('span', { className: 'badge warn' }, lost) : ''),
    el('td', { className: 'muted' }, clip((t.tags || []).join(' '), 80)));
}

const HEAD = ['Name', 'Status', 'Started', 'Duration', 'Iterations', 'Tool calls', 'Tokens', 'Cost', 'Errors', 'Lost', 'Tags'];
const NUM = new Set(['Duration', 'Iterations', 'Tool calls', 'Tokens', 'Cost', 'Errors']);

function filterForm(params) {
  const f = el('form', { className: 'filters', id: 'filters' });
  f.append(
    el('input', { name: 'q', type: 'search', placeholder: 'search: words "a phrase" type:tool.error tool:clock status:error', value: params.get('q') || '' }),
    el('select', { name: 'status' }, ['', 'success', 'error', 'running', 'incomplete', 'max_iterations', 'limit_exceeded', 'context_canceled', 'timeout', 'hook_abort']
      .map(s => el('option', { value: s, selected: params.get('status') === s }, s || 'any status'))),
    el('input', { name: 'name', placeholder: 'name', value: params.get('name') || '', size: 10 }),
    el('input', { name: 'tag', placeholder: 'tag', value: params.get('tag') || '', size: 8 }),
    el('input', { name: 'since', placeholder: 'since (24h)', value: params.get('since') || '', size: 8 }),
    el('input', { name: 'until', placeholder: 'until', value: params.get('until') || '', size: 8 }),
    el('input', { name: 'session', placeholder: 'session', value: params.get('session') || '', size: 10 }),
    el('input', { name: 'user', placeholder: 'user', value: params.get('user') || '', size: 8 }),
    el('label', {}, el('input', { name: 'errors', type: 'checkbox', checked: params.get('errors') === 'true' }), ' with errors'),
    el('input', { name: 'score', placeholder: 'score (thumbs=false)', value: params.get('score') || '', size: 14, title: 'runs with a score: NAME<OP>VALUE, e.g. helpfulness>=0.8, thumbs=false, label=good' }),
    el('button', { type: 'submit' }, 'Apply'), columnsPicker());
  f.addEventListener('submit', e => {
    e.preventDefault();
    const p = new URLSearchParams();
    for (const k of ['q', ...FILTERS]) {
      const inp = f.elements[k];
      if (!inp) continue;
      if (inp.type === 'checkbox') { if (inp.checked) p.set(k, 'true'); } else if (inp.value.trim()) p.set(k, inp.value.trim());
    }
    location.hash = '#/runs' + (p.toString() ? '?' + p : '');
  });
  return f;
}

export function runsPage(main, params) {
  const ctl = new AbortController();
  main.append(filterForm(params));
  if (params.get('q')) { searchResults(main, params, ctl.signal); return () => ctl.abort(); }

  const qs = new URLSearchParams();
  for (const k of FILTERS) for (const v of params.getAll(k)) qs.append(k, v);
  const tbody = el('tbody', { id: 'runs-body' });
  const table = el('table', { className: 'grid', id: 'runs' },
    el('thead', {}, el('tr', {}, HEAD.map(h => el('th', { className: NUM.has(h) ? 'num' : '' }, h)))), tbody);
  const more = el('button', { type: 'button', className: 'more', id: 'more', hidden: true }, 'More');
  const empty = el('p', { className: 'muted', id: 'empty', hidden: true },
    qs.toString() ? 'No runs match these filters.' : 'No runs yet. Run `loupe demo`, or send records to this server.');
  main.append(table, empty, more);
  let next = '';
  const load = async () => {
    try {
      const q = new URLSearchParams(qs);
      if (next) q.set('cursor', next);
      const page = await api('/api/v1/traces?' + q, ctl.signal);
      for (const t of page.traces) tbody.append(row(t));
      next = page.next || '';
      more.hidden = !next;
      empty.hidden = tbody.children.length > 0;
      await fillScoreColumns(table, ctl.signal);
      main.dataset.loaded = 'true';
    } catch (e) { if (!ctl.signal.aborted) showError(e); }
  };
  more.addEventListener('click', load);
  load();

  // Live: a "trace" event for each committed batch; fetch the run's
  // summary (debounced per trace) and insert or refresh its row.
  const pending = new Map();
  const es = watchStream(new EventSource('/api/v1/stream'));
  es.addEventListener('trace', ev => {
    let te; try { te = JSON.parse(ev.data); } catch { return; }
    const id = te.trace_id;
    if (!id || pending.has(id)) return;
    pending.set(id, setTimeout(async () => {
      pending.delete(id);
      try {
        const q = new URLSearchParams(qs);
        q.set('id_prefix', id); q.set('limit', '1');
        const page = await api('/api/v1/traces?' + q, ctl.signal);
        const old = tbody.querySelector(`tr[data-trace="${CSS.escape(id)}"]`);
        if (!page.traces.length) return; // filtered out
        const r = row(page.traces[0]);
        if (old) old.replaceWith(r); else { r.className = 'new'; tbody.prepend(r); }
        empty.hidden = true;
        await fillScoreColumns(table, ctl.signal);
      } catch (e) { if (!ctl.signal.aborted) console.warn('loupe: live update', e); }
    }, 250));
  });
  return () => { ctl.abort(); es.close(); for (const t of pending.values()) clearTimeout(t); };
}

async function searchResults(main, params, signal) {
  const tbody = el('tbody', { id: 'hits-body' });
  const more = el('button', { type: 'button', className: 'more', hidden: true }, 'More');
  main.append(el('table', { className: 'grid', id: 'hits' },
    el('thead', {}, el('tr', {}, ['Run', 'Time', 'Type', 'Name', 'Field', 'Match'].map(h => el('th', {}, h)))), tbody), more);
  let next = '';
  const load = async () => {
    try {
      const q = new URLSearchParams({ q: params.get('q') });
      if (next) q.set('cursor', next);
      const page = await api('/api/v1/search?' + q, signal);
      for (const h of page.hits) {
        tbody.append(el('tr', { 'data-trace': h.trace_id, 'data-seq': h.seq },
          el('td', {}, el('a', { href: `#/run/${encodeURIComponent(h.trace_id)}?seq=${h.seq}`, className: 'hitlink' }, clip(h.trace_name || h.trace_id, 60))),
          el('td', {}, fmtTime(h.time)),
          el('td', {}, h.type),
          el('td', {}, clip(h.name, 60)),
          el('td', {}, h.field || ''),
          el('td', { className: 'snippet' }, clip(h.snippet, 400))));
      }
      next = page.next || '';
      more.hidden = !next;
      if (!tbody.children.length) main.append(el('p', { className: 'muted', id: 'nohits' }, 'No records match.'));
      main.dataset.loaded = 'true';
    } catch (e) { if (!signal.aborted) showError(e); }
  };
  more.addEventListener('click', load);
  load();
}
