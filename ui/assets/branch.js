// "Re-run from here": in a run's span details, for a model call or an
// iteration of the run's root loop, a form that branches the run from
// that step (POST /api/v1/traces/{id}/branch, as loupe replay --from-step
// does): the steps before it are answered from the recording, it and the
// rest by a model the server allows (GET /api/v1/branch), with the
// system prompt as edited. Shown to admin sessions only (the server
// refuses the others anyway); on success the compare page opens.
import { el, clip } from './dom.js';
import { canDelete } from './session.js';

let config = null; // the promise of GET /api/v1/branch, asked once

function branchConfig() {
  if (!config) {
    config = fetch('/api/v1/branch', { headers: { Accept: 'application/json' } }).then(async r => {
      const body = await r.json().catch(() => null);
      if (!r.ok) throw new Error((body && body.error) || `/api/v1/branch: HTTP ${r.status}`);
      return body;
    });
    config.catch(() => { config = null; }); // ask again next time
  }
  return config;
}

/** stepOf returns the step a span can be re-run from: the iteration of a
 *  model call or an iteration of the root run (depth 0), else 0. */
function stepOf(n) {
  const r = n.recs[0];
  if (!r || r.depth) return 0;
  if (n.type !== 'model.call' && n.type !== 'iteration.start') return 0;
  return Number(r.iteration) || 0;
}

/** recordedSystem is the system prompt of the run's first model call, as
 *  recorded ('' when its values are not loaded or it had none). */
function recordedSystem(m) {
  let first = null;
  for (const [seq, n] of m.bySeq) {
    if (n.type === 'model.call' && !(n.recs[0] && n.recs[0].depth) && (first === null || seq < first.seq)) {
      const r = n.recs.find(x => x.seq === seq);
      if (r) first = r;
    }
  }
  const msgs = first && first.input && Array.isArray(first.input.new) ? first.input.new : [];
  const sys = msgs.find(x => x && x.role === 'system');
  return sys && typeof sys.content === 'string' ? sys.content : '';
}

/** branchControl returns the "Re-run from here" control for span n of
 *  the run in model m, or nothing when n cannot be branched from or the
 *  session may not. */
export function branchControl(n, m) {
  const step = stepOf(n);
  if (!step || !canDelete()) return [];
  const traceID = n.recs[0].trace_id;
  const system = recordedSystem(m);
  const model = el('select', { id: 'branch-model', name: 'model', required: true });
  const prompt = el('textarea', { id: 'branch-system', name: 'system', rows: 5, placeholder: 'The recorded system prompt is kept when this is left as it is' });
  prompt.value = system;
  const submit = el('button', { type: 'submit', id: 'branch-submit', disabled: true }, `Re-run from step ${step}`);
  const err = el('p', { className: 'errtext', id: 'branch-error', hidden: true });
  const note = el('p', { className: 'muted', id: 'branch-note' }, 'Loading the models this server allows…');
  const form = el('form', { className: 'branch-form', id: 'branch-form' },
    el('p', { className: 'muted' }, `Steps before ${step} are answered from this run's recording; step ${step} and after by the model you pick. The new run is stored and tagged replay-of:${clip(traceID, 40)}.`),
    el('label', {}, 'Model ', model), el('label', { className: 'block' }, 'System prompt', prompt), note, submit, err);
  const box = el('details', { className: 'branch', id: 'branch' }, el('summary', { id: 'branch-open' }, 'Re-run from here'), form);
  branchConfig().then(c => {
    const models = (c && c.models) || [];
    for (const s of models) model.append(el('option', { value: s }, clip(s, 200)));
    if (!models.length) { note.textContent = 'This server allows no models for re-runs: start loupe serve with --branch-models.'; return; }
    const limits = [c.max_cost_usd ? `at most $${c.max_cost_usd} for the live steps` : '', c.max_steps ? `${c.max_steps} steps` : '', c.timeout_seconds ? `${Math.round(c.timeout_seconds)} s` : ''].filter(Boolean);
    note.textContent = limits.length ? 'Limits: ' + limits.join(', ') + '.' : '';
    submit.disabled = false;
  }).catch(e => { note.textContent = String(e.message || e); });
  form.addEventListener('submit', async e => {
    e.preventDefault();
    submit.disabled = true;
    err.hidden = true;
    const body = { step, model: model.value };
    if (prompt.value !== system) body.system = prompt.value;
    try {
      const r = await fetch(`/api/v1/traces/${encodeURIComponent(traceID)}/branch`, {
        method: 'POST', headers: { 'Content-Type': 'application/json', Accept: 'application/json' }, body: JSON.stringify(body),
      });
      const ans = await r.json().catch(() => null);
      const msg = (ans && ans.error) || `re-run: HTTP ${r.status}`;
      if (r.status === 401) window.dispatchEvent(new CustomEvent('loupe:unauthorized', { detail: msg }));
      if (r.status !== 202 || !ans || !ans.trace_id) throw new Error(msg);
      location.hash = `#/compare/${encodeURIComponent(ans.original)}/${encodeURIComponent(ans.trace_id)}`;
    } catch (ex) {
      err.textContent = String(ex.message || ex);
      err.hidden = false;
      submit.disabled = false;
    }
  });
  return [box];
}
