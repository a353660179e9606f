// The online evaluation rules page (/api/v1/rules): each rule's state,
// its counters, its judge's cost this hour and its results over the last
// day (mean score and pass rate per hour). Admin keys (or a collector
// without keys) may pause and resume rules here.
import { el, api, showError, clip, fmtInt } from './dom.js';

const SVG = 'http://www.w3.org/2000/svg';

function svg(tag, attrs, text) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
  if (text !== undefined) e.textContent = String(text);
  return e;
}

const pct = x => (100 * Number(x || 0)).toFixed(1) + '%';

// passChart draws the pass rate per hour of the last 24 as bars (one per
// hour with scores), each with its numbers as a tooltip.
function passChart(history) {
  const w = 144, h = 32, n = 24, bw = w / n;
  const s = svg('svg', { class: 'rulechart', width: w, height: h, viewBox: `0 0 ${w} ${h}`, role: 'img' });
  s.append(svg('title', {}, 'pass rate per hour, last 24 hours'));
  const now = Date.now();
  for (const b of history || []) {
    const age = Math.floor((now - new Date(b.start).getTime()) / 3600e3);
    if (!(age >= 0 && age < n)) continue;
    const x = w - (age + 1) * bw;
    const bh = Math.max(2, Number(b.pass_rate) * (h - 2));
    const r = svg('rect', { x: x + 1, y: h - bh, width: bw - 2, height: bh, class: Number(b.pass_rate) < 0.8 ? 'barbad' : 'barrect' });
    r.append(svg('title', {}, `${new Date(b.start).toLocaleString()}: ${b.count} scored, pass ${pct(b.pass_rate)}, mean ${Number(b.mean_score).toFixed(2)}`));
    s.append(r);
  }
  return s;
}

export function rulesPage(main) {
  const ctl = new AbortController();
  const canChange = () => ['admin', 'open'].includes(document.body.dataset.auth);
  const body = el('tbody', { id: 'rules-body' });
  const summary = el('div', { className: 'run-head', id: 'rules-summary' });
  main.append(el('div', { className: 'filters' }, el('strong', {}, 'Online evaluation rules')), summary,
    el('div', { className: 'tablewrap' }, el('table', { className: 'grid', id: 'rules' },
      el('thead', {}, el('tr', {}, ['Rule', 'State', 'Filter', 'Sample', 'Matched', 'Sampled', 'Evaluated', 'Dropped', 'Errors', 'Judge $/h', 'Mean', 'Pass', 'Pass rate, 24 h', ''].map(h => el('th', {}, h)))),
      body)));
  const load = () => api('/api/v1/rules', ctl.signal).then(list => {
    body.replaceChildren();
    summary.replaceChildren(
      el('span', {}, list.enabled ? `${list.rules.length} rule(s)` : 'Online evaluation is off on this server (start loupe serve with --rules FILE).'),
      list.enabled ? el('span', { className: 'muted' }, ` · ${fmtInt(list.pending)} queued · ${fmtInt(list.dropped)} dropped (queue full)`) : '');
    for (const r of list.rules) {
      const s = r.stats || {};
      const paused = r.state === 'paused';
      let action = '';
      if (canChange()) {
        action = el('button', { type: 'button', className: 'rule-toggle', on: { click: () => {
          api('/api/v1/rules/' + encodeURIComponent(r.name) + (paused ? '/resume' : '/pause'), ctl.signal, 'POST').then(load, e => showError(e));
        } } }, paused ? 'Resume' : 'Pause');
      }
      body.append(el('tr', { 'data-rule': r.name, 'data-state': r.state },
        el('td', {}, el('strong', {}, clip(r.name, 80)), el('div', { className: 'muted' }, `${r.origin} · ${(r.graders || []).map(g => clip(g, 40)).join(', ')}`)),
        el('td', {}, el('span', { className: 'badge ' + (paused ? 'warn' : 'ok') }, paused ? 'paused' : 'active'),
          paused && r.reason ? el('div', { className: 'errtext reason' }, clip(r.reason, 500)) : ''),
        el('td', { className: 'snippet' }, clip(r.filter || '(every run)', 200)),
        el('td', { className: 'num' }, pct(r.sample)),
        ...[s.matched, s.sampled, s.evaluated, s.dropped, s.errors].map(v => el('td', { className: 'num' }, fmtInt(v))),
        el('td', { className: 'num' }, '$' + Number(s.judge_cost_usd_hour || 0).toFixed(4)),
        el('td', { className: 'num' }, s.scored ? Number(s.mean_score).toFixed(2) : '–'),
        el('td', { className: 'num pass-rate' }, s.scored ? pct(s.pass_rate) : '–'),
        el('td', {}, passChart(s.history)),
        el('td', {}, action)));
    }
    main.dataset.loaded = 'true';
  }, e => { if (!ctl.signal.aborted) showError(e); });
  load();
  return () => ctl.abort();
}
