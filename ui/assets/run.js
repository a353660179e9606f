// The run page: the span tree beside a waterfall on one time axis, drawn
// virtually (only the rows in view are in the DOM, so 100k spans work),
// a details panel for the selected span, the memory pool, stats and
// evaluations, and live updates for a running trace.
import { el, api, showError, watchStream, clip, fmtDur, fmtCost, fmtInt, fmtTime, parseTime } from './dom.js';
import { canDelete } from './session.js';
import { jsonView } from './json.js';
import { statusBadge } from './runs.js';
import { annotatePanel } from './annotate.js';

import { addToDatasetButton } from './datasets.js';

import { branchControl } from './branch.js';

const ROW = 22;      // px per row; .row's height in style.css
const OVERSCAN = 8;  // rows drawn above and below the view

/** Model is the span tree rebuilt from records (in any order after the
 *  first load: live records are added as they come). */
export class Model {
  constructor() {
    this.nodes = new Map(); // span id → node
    this.bySeq = new Map(); // seq → node
    this.roots = [];
    this.waiting = new Map(); // missing parent id → orphans kept as roots
    this.t0 = Infinity; this.t1 = -Infinity;
    this.version = 0;
  }
  add(r) {
    if (this.bySeq.has(r.seq)) return false;
    let n = this.nodes.get(r.span_id);
    if (!n) {
      n = { id: r.span_id, type: r.type, name: '', start: Infinity, end: -Infinity, status: '', error: '', iteration: 0,
        recs: [], children: [], p: null, failed: false, guard: false, badpath: false, closed: false };
      this.nodes.set(n.id, n);
      const parent = r.parent_id ? this.nodes.get(r.parent_id) : null;
      if (parent) { n.p = parent; parent.children.push(n); } else {
        this.roots.push(n);
        if (r.parent_id) { const w = this.waiting.get(r.parent_id) || []; w.push(n); this.waiting.set(r.parent_id, w); }
      }
      const orphans = this.waiting.get(n.id);
      if (orphans) { // their parent arrived after them: move them under it
        this.waiting.delete(n.id);
        const set = new Set(orphans);
        this.roots = this.roots.filter(x => !set.has(x));
        for (const o of orphans) { o.p = n; n.children.push(o); if (o.failed || o.guard || o.badpath) mark(n); }
      }
    }
    this.bySeq.set(r.seq, n);
    n.recs.push(r);
    const end = parseTime(r.time), start = end - (r.duration_ns || 0) / 1e6;
    if (start < n.start) n.start = start;
    if (end > n.end) n.end = end;
    if (start < this.t0) this.t0 = start;
    if (end > this.t1) this.t1 = end;
    if (r.type === 'log' && n.recs.length === 1) n.name = logLine(r);
    if (!n.name && r.name) n.name = r.name;
    if (r.status) n.status = r.status;
    if (r.error) n.error = r.error;
    if (n.recs.length === 1) n.iteration = r.iteration || 0; // the iteration the span began in
    if (r.error || r.type === 'tool.error' || r.type === 'hook.error' || r.type === 'error') { n.failed = true; mark(n.p); }
    if (r.type === 'guardrail') { n.guard = true; mark(n.p); }
    this.version++;
    return true;
  }
  /** rows returns the visible nodes in tree order, with their depth. */
  rows() {
    const out = [], depth = [];
    const stack = [];
    for (let i = this.roots.length - 1; i >= 0; i--) stack.push(this.roots[i], 0);
    while (stack.length) {
      const d = stack.pop(), n = stack.pop();
      n.depth = d; out.push(n); depth.push(d);
      if (!n.closed) for (let i = n.children.length - 1; i >= 0; i--) stack.push(n.children[i], d + 1);
    }
    return out;
  }
}

// logLine is how a log record reads in the tree: its severity, its logger
// or event name and its body's text.
function logLine(r) {
  const o = r.output && typeof r.output === 'object' && !Array.isArray(r.output) ? r.output : { body: r.output };
  let body = o.body === undefined || o.body === null ? '' : typeof o.body === 'string' ? o.body : JSON.stringify(o.body);
  body = body.replace(/\s+/g, ' ');
  const head = [r.status, r.name].filter(Boolean).join(' ');
  return head && body ? head + ': ' + body : head || body;
}

// mark flags n and its ancestors as on a failing path.
function mark(n) { for (; n && !n.badpath; n = n.p) n.badpath = true; }

function barClass(t) {
  if (t.startsWith('tool')) return 'tool';
  if (t.startsWith('model')) return 'model';
  if (t.startsWith('iteration')) return 'iter';
  if (t === 'log') return 'log';
  return '';
}

export function runPage(main, id, params) {
  const ctl = new AbortController();
  let es = null;
  const cleanup = () => { ctl.abort(); if (es) es.close(); };
  load(main, id, params, ctl.signal, s => { es = s; }).catch(e => { if (!ctl.signal.aborted) showError(e); });
  return cleanup;
}

// FIRST is the size of the first page of records, fetched with their
// values: a run this small is drawn from one request and never fetches
// again. PAGE is the size of the later pages, fetched without values
// (a selected span's values are fetched when it is shown), so that a
// run of 100k spans is drawn from its first page and fills in behind.
const FIRST = 2000, PAGE = 20000;

async function load(main, id, params, signal, setStream) {
  const t0 = performance.now();
  const base = '/api/v1/traces/' + encodeURIComponent(id);
  const first = await api(`${base}/records?limit=${FIRST}`, signal);
  if (signal.aborted) return; // the page was left meanwhile
  const tFetched = performance.now();
  const m = new Model();
  for (const r of first.records) m.add(r);
  main.dataset.fetchMs = String(Math.round(tFetched - t0));
  main.dataset.buildMs = String(Math.round(performance.now() - tFetched));
  const s = first.summary;

  const status = el('span', { id: 'run-status' }, statusBadge(s.status));
  const dur = el('span', { className: 'muted', id: 'run-duration' }, fmtDur(s.duration_ns));
  main.append(el('div', { className: 'run-head' },
    el('h1', { title: clip(s.name, 1000) }, clip(s.name || '(unnamed)', 120)), status,
    el('span', { className: 'muted' }, fmtTime(s.started)), dur,
    el('span', { className: 'muted' }, `${fmtInt(s.records)} records · ${fmtInt(s.iterations)} iterations · ${fmtInt(s.tool_calls)} tool calls · ${fmtInt(s.input_tokens + s.output_tokens)} tokens · ${fmtCost(s.cost_usd, s.unpriced_calls)}`),
    s.errors ? el('span', { className: 'badge bad' }, `${s.errors} errors`) : '',
    s.incomplete ? el('span', { className: 'badge warn' }, s.lost_records ? `incomplete: ${s.lost_records} records lost` : 'incomplete') : '',
    el('code', { className: 'muted' }, s.trace_id), canDelete() ? addToDatasetButton(s.trace_id) : '',
    canDelete() ? deleteButton(s.trace_id, signal) : ''));

  // The memory pool, stats and evaluations come from the whole trace:
  // fetched once, when one of their tabs is first opened.
  let whole = null;
  const lazy = (pane, view, key) => () => {
    if (pane.dataset.loaded) return;
    pane.dataset.loaded = 'pending';
    pane.replaceChildren(el('p', { className: 'muted' }, 'Loading…'));
    whole = whole || api(base, signal);
    whole.then(d => { pane.replaceChildren(view(d[key], s.trace_id)); pane.dataset.loaded = 'true'; })
      .catch(e => { delete pane.dataset.loaded; if (!signal.aborted) showError(e); });
  };
  const panes = {
    tree: el('div', { className: 'split', id: 'pane-tree' }),
    memory: el('div', { id: 'pane-memory', hidden: true }),
    stats: el('div', { id: 'pane-stats', hidden: true }),
    evaluations: el('div', { id: 'pane-evaluations', hidden: true }),
  };
  const opens = {
    memory: lazy(panes.memory, memoryView, 'memory'),
    stats: lazy(panes.stats, statsView, 'stats'),
    evaluations: lazy(panes.evaluations, evalsView, 'evaluations'),
  };
  const tabs = el('div', { className: 'tabs' });
  for (const k of Object.keys(panes)) {
    tabs.append(el('button', { type: 'button', className: k === 'tree' ? 'on' : '', id: 'tab-' + k, on: { click: e => {
      if (opens[k]) opens[k]();
      for (const [k2, p] of Object.entries(panes)) p.hidden = k2 !== k;
      for (const b of tabs.children) b.classList.toggle('on', b === e.currentTarget);
    } } }, k[0].toUpperCase() + k.slice(1)));
  }
  main.append(tabs, ...Object.values(panes));

  const view = new TreeView(m, id, panes.tree, signal);
  const wanted = () => (params.get('span') ? m.nodes.get(params.get('span')) : null) ||
    (params.get('seq') ? m.bySeq.get(Number(params.get('seq'))) : null);
  let sel = wanted();
  view.refresh();
  view.select(sel || m.roots[0], !!sel);
  main.insertBefore(annotatePanel(s.trace_id, () => view.sel && { id: view.sel.id, name: view.sel.name, root: !view.sel.p }, signal), tabs);
  main.dataset.loaded = 'true';
  main.dataset.drawMs = String(Math.round(performance.now() - t0));

  // The rest of a large run, a page at a time, drawn as it comes.
  for (let after = first.next; after && !signal.aborted;) {
    const page = await api(`${base}/records?after=${encodeURIComponent(after)}&limit=${PAGE}&values=false`, signal);
    if (signal.aborted) return;
    for (const r of page.records) { r.lean = true; m.add(r); }
    view.refresh();
    if (!sel && (sel = wanted())) view.select(sel, true);
    after = page.next;
  }
  main.dataset.complete = 'true';
  main.dataset.fullMs = String(Math.round(performance.now() - t0));

  if (s.status === 'running') {
    const es = watchStream(new EventSource(`/api/v1/traces/${encodeURIComponent(s.trace_id)}/stream`));
    setStream(es);
    let queued = false;
    es.addEventListener('record', ev => {
      let r; try { r = JSON.parse(ev.data); } catch { return; }
      if (!m.add(r)) return;
      if (!r.parent_id && r.type === 'run.end') {
        status.replaceChildren(statusBadge(r.status || 'success'));
        dur.textContent = fmtDur(r.duration_ns);
        es.close();
      }
      if (!queued) {
        queued = true;
        requestAnimationFrame(() => {
          queued = false;
          view.refresh();
          main.dataset.liveRecords = String(m.bySeq.size);
          if (!r.parent_id && r.type === 'run.end') return;
          dur.textContent = fmtDur((m.t1 - m.t0) * 1e6);
        });
      }
    });
  }
}

/** deleteButton deletes the run after a second click (no dialog: the
 *  button asks), then goes back to the runs. Shown to admin keys only. */
function deleteButton(id, signal) {
  const b = el('button', { type: 'button', id: 'delete-run', className: 'danger' }, 'Delete');
  b.addEventListener('click', async () => {
    if (b.dataset.armed !== 'true') { b.dataset.armed = 'true'; b.textContent = 'Delete this run?'; return; }
    b.disabled = true;
    try {
      await api('/api/v1/traces/' + encodeURIComponent(id), signal, 'DELETE');
      location.hash = '#/';
    } catch (e) { if (!signal.aborted) showError(e); b.disabled = false; }
  });
  return b;
}

/** TreeView draws a Model's rows virtually: a spacer as tall as every
 *  row, and only the rows in view (plus OVERSCAN) as elements. Its
 *  listener on window goes when signal is aborted (the page is left):
 *  left there, it would keep the view, and the whole trace, alive. */
class TreeView {
  constructor(m, traceID, pane, signal) {
    this.m = m; this.traceID = traceID; this.rows = []; this.sel = null; this.signal = signal;
    this.axis = el('div', { className: 'row axis' }, el('div', { className: 'cell' }, 'Span'), el('div', { className: 'cell wf', id: 'axis' }));
    this.inner = el('div', { className: 'rows' });
    this.box = el('div', { className: 'tree', id: 'tree', tabindex: 0, role: 'tree', 'aria-label': 'span tree' }, this.inner);
    this.details = el('div', { className: 'details', id: 'details' });
    const left = el('div', { className: 'treecol' }, this.axis, this.box);
    pane.append(left, this.details);
    let raf = 0;
    this.box.addEventListener('scroll', () => { if (!raf) raf = requestAnimationFrame(() => { raf = 0; this.draw(); }); });
    window.addEventListener('resize', () => this.draw(), { signal });
    this.box.addEventListener('click', e => {
      const rowEl = e.target.closest('.row[data-i]');
      if (!rowEl) return;
      const n = this.rows[Number(rowEl.dataset.i)];
      if (e.target.classList.contains('tw') && n.children.length) { n.closed = !n.closed; this.refresh(); }
      this.select(n, false);
    });
    this.box.addEventListener('keydown', e => this.key(e));
  }
  refresh() {
    this.rows = this.m.rows();
    this.index = new Map(this.rows.map((n, i) => [n, i]));
    this.inner.style.height = (this.rows.length * ROW) + 'px';
    this.drawAxis();
    this.draw();
  }
  // drawAxis labels the waterfall's time axis (the trace's whole span).
  drawAxis() {
    const ax = this.axis.querySelector('#axis');
    const total = Math.max(this.m.t1 - this.m.t0, 0);
    const ticks = [];
    for (let k = 0; k <= 4; k++) {
      const t = el('span', { className: 'tick' + (k === 0 ? ' first' : k === 4 ? ' last' : '') }, fmtDur(total * k / 4 * 1e6) || '0');
      t.style.left = (k * 25) + '%';
      ticks.push(t);
    }
    ax.replaceChildren(...ticks);
  }
  draw() {
    const { m } = this;
    const total = Math.max(m.t1 - m.t0, 1e-6);
    const h = this.box.clientHeight || 600;
    const first = Math.max(0, Math.floor(this.box.scrollTop / ROW) - OVERSCAN);
    const last = Math.min(this.rows.length, first + Math.ceil(h / ROW) + 2 * OVERSCAN);
    const frag = document.createDocumentFragment();
    for (let i = first; i < last; i++) {
      const n = this.rows[i];
      const tw = el('span', { className: 'tw' }, n.children.length ? (n.closed ? '▸' : '▾') : '');
      const name = el('span', { className: 'name' }, clip(n.name, 120));
      const bar = el('div', { className: 'bar ' + barClass(n.type) + (n.failed ? ' failed' : '') });
      const left = Math.max(0, (n.start - m.t0) / total * 100);
      bar.style.left = left + '%';
      bar.style.width = Math.max(0.15, Math.min(100 - left, (n.end - n.start) / total * 100)) + '%';
      const c1 = el('div', { className: 'cell' }, tw, el('span', { className: 'type' }, n.type), name,
        el('span', { className: 'dur' }, n.end > n.start ? fmtDur((n.end - n.start) * 1e6) : ''));
      c1.style.paddingLeft = (4 + n.depth * 14) + 'px';
      const r = el('div', {
        className: 'row' + (n === this.sel ? ' sel' : '') + (n.failed ? ' failed' : '') + (n.badpath ? ' badpath' : '') + (n.guard ? ' guard' : ''),
        'data-i': i, 'data-span': n.id, role: 'treeitem', 'aria-selected': n === this.sel,
      }, c1, el('div', { className: 'cell wf' }, bar));
      r.style.top = (i * ROW) + 'px';
      frag.append(r);
    }
    this.inner.replaceChildren(frag);
    this.inner.dataset.rows = String(this.rows.length);
  }
  select(n, scroll) {
    if (!n) return;
    this.sel = n;
    let i = this.index.get(n);
    if (i === undefined) { // inside a collapsed span: open its ancestors
      for (let p = n.p; p; p = p.p) p.closed = false;
      this.refresh(); i = this.index.get(n);
    }
    const top = i * ROW, h = this.box.clientHeight || 600;
    if (scroll || top < this.box.scrollTop || top + ROW > this.box.scrollTop + h) {
      if (top < this.box.scrollTop) this.box.scrollTop = top;
      else if (top + ROW > this.box.scrollTop + h) this.box.scrollTop = top - h + 2 * ROW;
    }
    this.draw();
    this.details.replaceChildren(...spanDetails(n, this.m));
    if (n.recs.some(r => r.lean)) this.fetchValues(n);
    history.replaceState(null, '', `#/run/${encodeURIComponent(this.traceID)}?span=${encodeURIComponent(n.id)}`);
    document.dispatchEvent(new CustomEvent('loupe:span-selected'));
  }
  // fetchValues fetches the values (input, output, thinking) of a span
  // whose records came without them, then shows them if it is still
  // the selected span.
  async fetchValues(n) {
    if (n.fetching) return;
    n.fetching = true;
    try {
      const page = await api(`/api/v1/traces/${encodeURIComponent(this.traceID)}/records?span=${encodeURIComponent(n.id)}&limit=1000`, this.signal);
      const full = new Map(page.records.map(r => [r.seq, r]));
      n.recs = n.recs.map(r => (r.lean && full.get(r.seq)) || r);
      if (this.sel === n) this.details.replaceChildren(...spanDetails(n, this.m));
    } catch (e) { if (!this.signal.aborted) showError(e); } finally { n.fetching = false; }
  }
  key(e) {
    const n = this.sel; if (!n) return;
    const i = this.index.get(n);
    let to = null;
    switch (e.key) {
      case 'ArrowDown': case 'j': to = this.rows[Math.min(this.rows.length - 1, i + 1)]; break;
      case 'ArrowUp': case 'k': to = this.rows[Math.max(0, i - 1)]; break;
      case 'Home': to = this.rows[0]; break;
      case 'End': to = this.rows[this.rows.length - 1]; break;
      case 'PageDown': to = this.rows[Math.min(this.rows.length - 1, i + Math.floor(this.box.clientHeight / ROW))]; break;
      case 'PageUp': to = this.rows[Math.max(0, i - Math.floor(this.box.clientHeight / ROW))]; break;
      case 'ArrowRight': case 'l':
        if (n.children.length && n.closed) { n.closed = false; this.refresh(); to = n; } else to = n.children[0] || n; break;
      case 'ArrowLeft': case 'h':
        if (n.children.length && !n.closed) { n.closed = true; this.refresh(); to = n; } else to = n.p || n; break;
      case 'Enter': case ' ':
        if (n.children.length) { n.closed = !n.closed; this.refresh(); } to = n; break;
      default: return;
    }
    e.preventDefault();
    this.select(to, false);
  }
}

function kv(pairs) {
  const dl = el('dl', { className: 'kv' });
  for (const [k, v] of pairs) if (v !== '' && v !== undefined && v !== null && v !== 0) dl.append(el('dt', {}, k), el('dd', {}, v));
  return dl;
}

function spanDetails(n, m) {
  const out = [el('h2', { id: 'detail-title' }, el('span', { className: 'type' }, n.type), ' ', clip(n.name, 300))];
  out.push(kv([
    ['span', n.id], ['status', n.status], ['duration', n.end > n.start ? fmtDur((n.end - n.start) * 1e6) : ''],
    ['starts at', '+' + fmtDur((n.start - m.t0) * 1e6)], ['iteration', n.iteration || ''],
    ['children', n.children.length || ''],
  ]));
  if (n.error) out.push(el('div', { className: 'errtext', id: 'detail-error' }, clip(n.error, 20000)));
  out.push(...branchControl(n, m));
  for (const r of n.recs) {
    const box = el('div', { className: 'rec', 'data-seq': r.seq });
    box.append(el('h3', {}, `#${r.seq} ${r.type}`, el('span', { className: 'muted' }, ' ' + fmtTime(r.time))));
    const u = r.usage || {};
    box.append(kv([
      ['name', clip(r.name, 300)], ['status', r.status], ['duration', r.duration_ns ? fmtDur(r.duration_ns) : ''],
      ['input tokens', u.input_tokens], ['output tokens', u.output_tokens], ['cached tokens', u.cached_tokens],
      ['reasoning tokens', u.reasoning_tokens], ['cost', fmtCost(u.cost_usd, u.cost_unknown ? 1 : 0)], ['provider', u.provider],
      ['tags', (r.tags || []).join(' ')],
    ]));
    if (r.error) box.append(el('div', { className: 'errtext' }, clip(r.error, 20000)));
    if (r.lean) box.append(el('p', { className: 'muted loading' }, 'Loading values…'));
    for (const f of ['input', 'output', 'thinking']) {
      if (r[f] === undefined) continue;
      box.append(el('h3', { className: f === 'thinking' ? 'thinking' : '' }, f), jsonView(r[f]));
    }
    out.push(box);
  }
  return out;
}

function memoryView(mem, traceID) {
  mem = mem || {};
  const out = el('div', { className: 'details' });
  const section = (title, obj) => {
    out.append(el('h3', {}, title));
    const keys = Object.keys(obj || {});
    if (!keys.length) { out.append(el('p', { className: 'muted' }, 'none')); return; }
    for (const k of keys) out.append(el('div', {}, el('strong', {}, clip(k, 200)), jsonView(obj[k])));
  };
  section('Parameters', mem.params);
  section('Globals', mem.globals);
  out.append(el('h3', {}, 'Memory (each key\'s history)'));
  const hist = mem.history || {};
  if (!Object.keys(hist).length) out.append(el('p', { className: 'muted' }, 'none'));
  for (const [k, ws] of Object.entries(hist)) {
    out.append(el('h3', {}, clip(k, 200)));
    const tb = el('tbody');
    for (const w of ws) tb.append(el('tr', {}, el('td', { className: 'num' }, String(w.step)), el('td', { className: 'num' }, el('a', { href: `#/run/${encodeURIComponent(traceID)}?seq=${Number(w.seq)}`, className: 'seqlink' }, String(w.seq))), el('td', {}, fmtTime(w.time)), el('td', {}, jsonView(w.value))));
    out.append(el('table', { className: 'grid' }, el('thead', {}, el('tr', {}, ['Step', 'Seq', 'Time', 'Value'].map(h => el('th', {}, h)))), tb));
  }
  return out;
}

function statsView(st) {
  st = st || {};
  const out = el('div', { className: 'details' });
  out.append(el('h3', {}, 'Run, with its child runs'), kv([
    ['records', fmtInt(st.records)], ['iterations', fmtInt(st.iterations)], ['model calls', fmtInt(st.model_calls)],
    ['input tokens', fmtInt(st.input_tokens)], ['output tokens', fmtInt(st.output_tokens)], ['cached tokens', fmtInt(st.cached_tokens)],
    ['reasoning tokens', fmtInt(st.reasoning_tokens)], ['cost', fmtCost(st.cost_usd, st.unpriced_calls)], ['tool calls', fmtInt(st.tool_calls)],
    ['errors', fmtInt(st.errors)], ['child runs', fmtInt(st.children)], ['guardrails', fmtInt(st.guardrails)],
  ]));
  const models = Object.entries(st.by_model || {});
  if (models.length) {
    out.append(el('h3', {}, 'By model'), el('table', { className: 'grid' },
      el('thead', {}, el('tr', {}, ['Model', 'Calls', 'Input', 'Output', 'Cached', 'Reasoning', 'Cost'].map(h => el('th', {}, h)))),
      el('tbody', {}, models.map(([k, v]) => el('tr', {}, el('td', {}, clip(k, 100)), ...[v.calls, v.input_tokens, v.output_tokens, v.cached_tokens, v.reasoning_tokens].map(x => el('td', { className: 'num' }, fmtInt(x))), el('td', { className: 'num' }, fmtCost(v.cost_usd, v.unpriced_calls)))))));
  }
  const tools = Object.entries(st.by_tool || {});
  if (tools.length) {
    out.append(el('h3', {}, 'By tool'), el('table', { className: 'grid' },
      el('thead', {}, el('tr', {}, ['Tool', 'Calls', 'Errors', 'Total', 'Slowest'].map(h => el('th', {}, h)))),
      el('tbody', {}, tools.map(([k, v]) => el('tr', {}, el('td', {}, clip(k, 100)), el('td', { className: 'num' }, fmtInt(v.calls)), el('td', { className: 'num' }, fmtInt(v.errors)), el('td', { className: 'num' }, fmtDur(v.total_ns)), el('td', { className: 'num' }, fmtDur(v.max_ns)))))));
  }
  return out;
}

function evalsView(evs) {
  const out = el('div', { className: 'details' });
  if (!evs || !evs.length) { out.append(el('p', { className: 'muted' }, 'No evaluations of this run.')); return out; }
  for (const e of evs) out.append(jsonView(e));
  return out;
}
