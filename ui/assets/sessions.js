// The sessions pages: the runs grouped by session (/api/v1/sessions), and
// one session read as its conversation (/api/v1/sessions/{id}): each run's
// question and answer in order, its tool calls folded in, its scores
// (people's, programs' and online rules'), its totals at the top with the
// session's own scores, and a link into each run's span tree. (Not the
// sign-in session of session.js.)
import { el, api, showError, clip, fmtDur, fmtCost, fmtInt, fmtTime } from './dom.js';
import { statusBadge } from './runs.js';
import { jsonView } from './json.js';
import { scoresOf, valueText } from './scores.js';

/** sessionHref is the page of session id. */
export function sessionHref(id) {
  return '#/session/' + encodeURIComponent(id);
}

/** sessionLink links to session id's page, or is empty when there is none. */
export function sessionLink(id) {
  if (!id) return '';
  return el('a', { href: sessionHref(id), className: 'sessionlink', title: clip(id, 1000) }, clip(id, 40));
}

const HEAD = ['Session', 'User', 'Runs', 'First run', 'Latest run', 'Tokens', 'Cost', 'Errors'];
const NUM = new Set(['Runs', 'Tokens', 'Cost', 'Errors']);

function filterForm(params) {
  const f = el('form', { className: 'filters', id: 'session-filters' },
    el('input', { name: 'user', placeholder: 'user', value: params.get('user') || '', size: 12 }),
    el('input', { name: 'since', placeholder: 'since (24h)', value: params.get('since') || '', size: 8 }),
    el('button', { type: 'submit' }, 'Apply'));
  f.addEventListener('submit', e => {
    e.preventDefault();
    const p = new URLSearchParams();
    for (const k of ['user', 'since']) { const v = f.elements[k].value.trim(); if (v) p.set(k, v); }
    location.hash = '#/sessions' + (p.toString() ? '?' + p : '');
  });
  return f;
}

export function sessionsPage(main, params) {
  const ctl = new AbortController();
  const qs = new URLSearchParams();
  for (const k of ['user', 'since', 'until']) if (params.get(k)) qs.set(k, params.get(k));
  const tbody = el('tbody', { id: 'sessions-body' });
  const more = el('button', { type: 'button', className: 'more', id: 'more', hidden: true }, 'More');
  const empty = el('p', { className: 'muted', id: 'empty', hidden: true },
    'No sessions yet. A run belongs to one when it is recorded with a session (trace.RunOptions.Session, agent.Executor.Session) or sent over OTLP with session.id.');
  main.append(filterForm(params), el('table', { className: 'grid', id: 'sessions' },
    el('thead', {}, el('tr', {}, HEAD.map(h => el('th', { className: NUM.has(h) ? 'num' : '' }, h)))), tbody), empty, more);
  let next = '';
  const load = async () => {
    try {
      const q = new URLSearchParams(qs);
      if (next) q.set('cursor', next);
      const page = await api('/api/v1/sessions?' + q, ctl.signal);
      for (const s of page.sessions) {
        tbody.append(el('tr', { 'data-session': s.session },
          el('td', {}, sessionLink(s.session)),
          el('td', {}, clip(s.user || '', 40)),
          el('td', { className: 'num' }, fmtInt(s.runs)),
          el('td', {}, fmtTime(s.first)),
          el('td', {}, fmtTime(s.last_started)),
          el('td', { className: 'num', title: `${s.input_tokens} in, ${s.output_tokens} out` }, fmtInt((s.input_tokens || 0) + (s.output_tokens || 0))),
          el('td', { className: 'num' }, fmtCost(s.cost_usd, s.unpriced_calls)),
          el('td', { className: 'num' + (s.errors ? ' errors' : '') }, s.errors ? el('span', { className: 'badge bad', title: `${s.error_runs} runs failed` }, String(s.errors)) : '0')));
      }
      next = page.next || '';
      more.hidden = !next;
      empty.hidden = tbody.children.length > 0;
      main.dataset.loaded = 'true';
    } catch (e) { if (!ctl.signal.aborted) showError(e); }
  };
  more.addEventListener('click', load);
  load();
  return () => ctl.abort();
}

/** messageText reads a run's input or answer as text: a JSON string
 *  itself; for a list of chat messages (OpenAI's content, the GenAI
 *  conventions' parts), the text of the last one; else null (shown as
 *  JSON). */
export function messageText(v) {
  if (typeof v === 'string') return v;
  if (!Array.isArray(v) || !v.length) return null;
  const m = v[v.length - 1];
  if (!m || typeof m !== 'object') return null;
  const texts = [];
  if (Array.isArray(m.parts)) for (const p of m.parts) if (p && p.type === 'text' && typeof p.content === 'string') texts.push(p.content);
  if (typeof m.content === 'string') texts.push(m.content);
  return texts.length ? texts.join('\n') : null;
}

// said is one side of a turn: the text if it reads as text, else the JSON.
function said(who, cls, v) {
  const t = messageText(v);
  return el('div', { className: 'said ' + cls },
    el('div', { className: 'who muted' }, who),
    t !== null ? el('div', { className: 'text' }, clip(t, 20000)) : jsonView(v));
}

function toolCall(tc) {
  const failed = !!tc.error;
  const out = failed ? tc.error : messageText(tc.output ?? null);
  return el('details', { className: 'toolcall' + (failed ? ' failed' : ''), 'data-tool': tc.name },
    el('summary', {}, el('strong', {}, clip(tc.name, 100)),
      el('span', { className: failed ? 'errtext' : 'muted' }, ' → ' + clip(out ?? JSON.stringify(tc.output ?? null), 120)),
      tc.duration_ns ? el('span', { className: 'muted' }, ' · ' + fmtDur(tc.duration_ns)) : ''),
    el('div', { className: 'muted' }, 'input'), jsonView(tc.input ?? null),
    failed ? el('div', { className: 'errtext' }, clip(tc.error, 5000)) : [el('div', { className: 'muted' }, 'output'), jsonView(tc.output ?? null)]);
}

function turnView(t, i) {
  const s = t.summary;
  const tools = t.tools || [];
  const box = el('article', { className: 'turn', 'data-trace': s.trace_id, 'data-turn': String(i + 1) },
    el('div', { className: 'turn-head' },
      el('a', { href: '#/run/' + encodeURIComponent(s.trace_id), className: 'runlink', title: 'open the run\'s span tree' }, clip(s.name || '(unnamed)', 80)),
      statusBadge(s.status),
      el('span', { className: 'muted' }, `${fmtTime(s.started)} · ${fmtDur(s.duration_ns)} · ${fmtInt((s.input_tokens || 0) + (s.output_tokens || 0))} tokens` +
        (s.cost_usd || s.unpriced_calls ? ' · ' + fmtCost(s.cost_usd, s.unpriced_calls) : ''))));
  if (t.input !== undefined) box.append(said('asked', 'in', t.input));
  if (tools.length) {
    box.append(el('details', { className: 'tools' },
      el('summary', {}, `${tools.length} tool call${tools.length === 1 ? '' : 's'}` + (tools.some(x => x.error) ? ` (${tools.filter(x => x.error).length} failed)` : '')),
      tools.map(toolCall)));
  }
  if (t.output !== undefined) box.append(said('answered', 'out', t.output));
  if (t.error) box.append(el('div', { className: 'errtext' }, clip(t.error, 5000)));
  return box;
}

export function sessionPage(main, id) {
  const ctl = new AbortController();
  api('/api/v1/sessions/' + encodeURIComponent(id), ctl.signal).then(v => {
    const s = v.session;
    const turns = v.turns || [];
    main.append(
      el('div', { className: 'run-head' }, el('h1', { title: clip(s.session, 1000) }, 'Session ' + clip(s.session, 100)),
        s.user ? el('span', { className: 'muted' }, 'user ' + clip(s.user, 80)) : '',
        el('a', { href: '#/runs?session=' + encodeURIComponent(s.session), className: 'muted' }, 'its runs in the list')),
      el('dl', { className: 'kv session-stats', id: 'session-stats' },
        el('dt', {}, 'runs'), el('dd', {}, fmtInt(s.runs) + (turns.length < s.runs ? ` (the last ${turns.length} shown)` : '')),
        el('dt', {}, 'from'), el('dd', {}, `${fmtTime(s.first)} to ${fmtTime(s.last)}`),
        el('dt', {}, 'tokens'), el('dd', {}, `${fmtInt(s.input_tokens)} in, ${fmtInt(s.output_tokens)} out`),
        el('dt', {}, 'cost'), el('dd', {}, fmtCost(s.cost_usd, s.unpriced_calls) || '$0'),
        el('dt', {}, 'errors'), el('dd', { className: s.errors ? 'errtext' : '' }, s.errors ? `${s.errors} in ${s.error_runs} run${s.error_runs === 1 ? '' : 's'}` : '0')),
      el('div', { className: 'conversation', id: 'conversation' }, turns.map(turnView)));
    main.dataset.loaded = 'true';
    showScores(main, s.session, turns.map(t => t.summary.trace_id), ctl.signal);
  }, e => { if (!ctl.signal.aborted) showError(e); });
  return () => ctl.abort();
}

// scoreChips shows scores as badges, by name: the name and the value,
// with where it comes from and its comment (a grader's explanation) as
// the title; a false boolean (a failed rule, a thumbs down) in red.
function scoreChips(list) {
  return [...list].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0)).map(s =>
    el('span', {
      className: 'badge score-chip' + (s.kind === 'boolean' && !s.value ? ' bad' : ''), 'data-name': s.name, 'data-source': s.source,
      title: clip(s.source + (s.author ? ' · ' + s.author : '') + (s.comment ? ': ' + s.comment : ''), 2000),
    }, `${clip(s.name, 60)} ${valueText(s)}`));
}

// showScores adds to the session page each run's own scores (not its
// spans', which its run page lists) under the run's head, and the
// session's scores under the totals.
async function showScores(main, session, ids, signal) {
  try {
    const byRun = [];
    for (let i = 0; i < ids.length; i += 100) byRun.push(...await scoresOf(ids.slice(i, i + 100), '', signal));
    const own = await api('/api/v1/scores?limit=1000&session=' + encodeURIComponent(session), signal);
    for (const box of main.querySelectorAll('#conversation article.turn')) {
      const list = byRun.filter(x => x.trace_id === box.dataset.trace && !x.span_id);
      if (list.length) box.querySelector('.turn-head').after(el('div', { className: 'turn-scores' }, scoreChips(list)));
    }
    if ((own.scores || []).length) {
      main.querySelector('#session-stats').after(el('div', { className: 'turn-scores', id: 'session-scores' },
        el('span', { className: 'muted' }, 'session scores'), scoreChips(own.scores)));
    }
    main.querySelector('#conversation').dataset.scores = 'loaded';
  } catch (e) { if (!signal.aborted) showError(e); }
}
