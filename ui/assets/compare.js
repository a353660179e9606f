// The compare page, #/compare/<a>/<b>: two runs side by side, step by
// step, each call of A beside the call of B at the same place, with the
// first divergence marked (≠) and explained, as loupe traces diff shows
// them (GET /api/v1/traces/diff). A run still going (a branch just
// started) is followed on its live stream and the comparison is asked
// again as its records come, until it ends.
import { el, api, showError, watchStream, clip, fmtDur, fmtCost, fmtInt } from './dom.js';
import { statusBadge } from './runs.js';

export function comparePage(main, a, b) {
  const ctl = new AbortController();
  const streams = [];
  const cleanup = () => { ctl.abort(); for (const es of streams) es.close(); };
  const box = el('div', { id: 'compare' });
  main.append(box);
  let pending = null, again = false, followed = false;
  const load = async () => {
    if (pending) { again = true; return; }
    pending = api(`/api/v1/traces/diff?a=${encodeURIComponent(a)}&b=${encodeURIComponent(b)}`, ctl.signal);
    try {
      const c = await pending;
      if (ctl.signal.aborted) return;
      box.replaceChildren(...render(c));
      const running = [c.a, c.b].filter(r => !r.status);
      main.dataset.loaded = 'true';
      main.dataset.running = String(running.length);
      if (!followed) {
        followed = true;
        for (const r of running) streams.push(follow(r.trace_id, load));
      }
    } catch (e) {
      if (!ctl.signal.aborted) showError(e);
    } finally {
      pending = null;
      if (again && !ctl.signal.aborted) { again = false; setTimeout(load, 200); }
    }
  };
  load();
  return cleanup;
}

// follow listens to a running trace's records and calls reload (at most
// every 300 ms, and once more at its end).
function follow(id, reload) {
  const es = watchStream(new EventSource(`/api/v1/traces/${encodeURIComponent(id)}/stream`));
  let timer = 0;
  es.addEventListener('record', ev => {
    let r; try { r = JSON.parse(ev.data); } catch { return; }
    const end = !r.parent_id && r.type === 'run.end';
    if (end) { es.close(); clearTimeout(timer); timer = 0; reload(); return; }
    if (!timer) timer = setTimeout(() => { timer = 0; reload(); }, 300);
  });
  return es;
}

function runCard(label, r) {
  const tokens = (r.input_tokens || 0) + (r.output_tokens || 0);
  return el('div', { className: 'cmp-run', id: 'compare-' + label.toLowerCase() },
    el('h2', {}, label, ' ', el('a', { href: `#/run/${encodeURIComponent(r.trace_id)}`, id: `compare-${label.toLowerCase()}-link`, title: r.trace_id }, clip(r.name || '(unnamed)', 80)),
      ' ', statusBadge(r.status || 'running')),
    el('div', { className: 'muted' }, `${fmtInt(r.steps)} steps · ${fmtInt(r.model_calls)} model calls · ${fmtInt(r.tool_calls)} tool calls · ${fmtInt(tokens)} tokens · ${fmtCost(r.cost_usd)}`),
    el('code', { className: 'muted' }, r.trace_id),
    (r.tags || []).length ? el('div', { className: 'muted' }, 'tags: ' + r.tags.map(t => clip(t, 80)).join(' ')) : '',
    (r.problems || []).length ? el('div', { className: 'badge warn' }, `${r.problems.length} problems in its records, e.g. ${clip(r.problems[0], 200)}`) : '',
    r.answer ? el('p', { className: 'snippet' }, clip(r.answer, 600)) : '');
}

// callText is one call in a line, as loupe traces diff writes it.
function callText(c) {
  const one = s => clip(String(s == null ? '' : s).replace(/\s+/g, ' '), 160);
  if (c.kind === 'model') {
    // The response is agent.Response, whose fields have Go's names.
    const resp = c.response || {};
    const u = resp.Usage || {};
    let s = `model ${c.name} · ${fmtInt((u.input_tokens || 0) + (u.output_tokens || 0))} tok`;
    const cost = fmtCost(u.cost_usd, u.cost_unknown ? 1 : 0);
    if (cost) s += ' · ' + cost;
    const calls = resp.ToolCalls || [];
    if (c.error) s += ' ✗ ' + one(c.error);
    else if (calls.length) s += ' → ' + calls.map(t => t.name).join(', ');
    else s += ' → ' + one(JSON.stringify(resp.Content || ''));
    return s;
  }
  const s = `tool ${c.name} ${one(JSON.stringify(c.input === undefined ? null : c.input))}`;
  return c.error ? s + ' ✗ ' + one(c.error) : s + ' → ' + one(JSON.stringify(c.output === undefined ? null : c.output));
}

function cell(c, traceID) {
  if (!c) return el('td', { className: 'cmp-none muted' }, '—');
  return el('td', { className: 'cmp-call ' + c.kind },
    el('a', { href: `#/run/${encodeURIComponent(traceID)}?seq=${Number(c.seq)}`, className: 'seqlink' }, callText(c)),
    c.duration_ns ? el('span', { className: 'dur' }, fmtDur(c.duration_ns)) : '');
}

function render(c) {
  const out = [el('div', { className: 'cmp-runs' }, runCard('A', c.a), runCard('B', c.b))];
  const d = c.divergence;
  if (d) {
    out.push(el('div', { className: 'cmp-divergence', id: 'compare-divergence', 'data-step': d.step },
      el('strong', {}, 'First divergence: '), d.step ? `step ${d.step}, ` : '', clip(d.call, 200), ': ', clip(d.summary, 500),
      (d.diff || []).length ? el('pre', { className: 'json' }, d.diff.map(l => clip(l, 2000)).join('\n')) : ''));
  } else {
    out.push(el('p', { className: 'muted', id: 'compare-divergence', 'data-step': 'none' },
      (c.a.status && c.b.status) ? 'No divergence: the same calls with the same inputs and outcomes, and the same answer.' : 'No divergence so far.'));
  }
  const tb = el('tbody');
  for (const s of c.steps || []) {
    (s.rows || []).forEach((row, i) => {
      tb.append(el('tr', { className: row.diverged ? 'diverged' : '', 'data-step': s.step, 'data-diverged': row.diverged ? 'true' : null },
        el('td', { className: 'num mark' }, row.diverged ? '≠' : ''),
        el('td', { className: 'num' }, i === 0 ? String(s.step) : ''),
        cell(row.a, c.a.trace_id), cell(row.b, c.b.trace_id)));
    });
  }
  out.push(el('table', { className: 'grid cmp', id: 'compare-steps' },
    el('thead', {}, el('tr', {}, el('th', {}, ''), el('th', { className: 'num' }, 'Step'), el('th', {}, 'A'), el('th', {}, 'B'))), tb));
  return out;
}
