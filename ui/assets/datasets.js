// The datasets pages: the list of datasets (/api/v1/datasets), one
// dataset's cases and versions, and the "Add to dataset" form of the run
// view, which pre-fills a case from the run (/api/v1/traces/<id>/case) and
// saves it, as edited, through POST /api/v1/datasets/<name>/cases.
import { el, api, showError, clip, fmtTime } from './dom.js';
import { canDelete } from './session.js';
import { jsonView } from './json.js';

/** send posts a JSON body and returns the JSON answer, throwing the
 *  server's message on failure (a 401 also asks for the sign-in form). */
export async function send(path, method, body) {
  const r = await fetch(path, { method, headers: { Accept: 'application/json', 'Content-Type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) });
  let out;
  try { out = await r.json(); } catch { out = null; }
  const msg = (out && out.error) || `${path}: HTTP ${r.status}`;
  if (r.status === 401) window.dispatchEvent(new CustomEvent('loupe:unauthorized', { detail: msg }));
  if (!r.ok) throw new Error(msg);
  return out;
}

const dsLink = (name, version) => '#/dataset/' + encodeURIComponent(name) + (version ? '?version=' + encodeURIComponent(version) : '');

export function datasetsPage(main) {
  const ctl = new AbortController();
  const tbody = el('tbody', { id: 'datasets-body' });
  main.append(el('h1', {}, 'Datasets'),
    el('table', { className: 'grid', id: 'datasets' },
      el('thead', {}, el('tr', {}, ['Dataset', 'Version', 'Cases', 'Updated', 'Change'].map(h => el('th', {}, h)))), tbody));
  api('/api/v1/datasets', ctl.signal).then(page => {
    for (const d of page.datasets) {
      tbody.append(el('tr', { 'data-dataset': d.name },
        el('td', {}, el('a', { href: dsLink(d.name) }, clip(d.name, 120))),
        el('td', { className: 'num' }, String(d.version)), el('td', { className: 'num' }, String(d.case_count)),
        el('td', {}, fmtTime(d.created)), el('td', {}, clip(d.note, 200))));
    }
    if (!page.datasets.length) main.append(el('p', { className: 'muted', id: 'empty' }, 'No datasets yet: open a run and use "Add to dataset", or run `loupe dataset add TRACE --dataset NAME`.'));
    main.dataset.loaded = 'true';
  }, e => { if (!ctl.signal.aborted) showError(e); });
  return () => ctl.abort();
}

export function datasetPage(main, name, params) {
  const ctl = new AbortController();
  const v = params.get('version');
  api('/api/v1/datasets/' + encodeURIComponent(name) + (v ? '?version=' + encodeURIComponent(v) : ''), ctl.signal).then(d => {
    main.append(el('div', { className: 'run-head' }, el('h1', {}, `${clip(d.name, 120)}@${d.version}`),
      el('span', { className: 'muted' }, `${d.case_count} cases · ${fmtTime(d.created)}`),
      el('a', { href: '/api/v1/datasets/' + encodeURIComponent(d.name) + '/export?version=' + d.version, id: 'export' }, 'AgentV eval file'),
      el('a', { href: '#/experiments?dataset=' + encodeURIComponent(d.name) }, 'Experiments'),
      canDelete() ? deleteDataset(d.name) : ''));
    const cases = el('div', { id: 'cases' });
    for (const c of d.cases) {
      const t = c.trajectory;
      cases.append(el('div', { className: 'rec case', 'data-case': c.id },
        el('h3', {}, clip(c.id, 200), c.trace ? el('a', { href: '#/run/' + encodeURIComponent(c.trace), className: 'tracelink' }, ' from run') : ''),
        el('dl', { className: 'kv' },
          el('dt', {}, 'input'), el('dd', { className: 'snippet' }, clip(c.input, 4000)),
          c.criteria ? [el('dt', {}, 'criteria'), el('dd', { className: 'snippet' }, clip(c.criteria, 4000))] : '',
          c.expected_output ? [el('dt', {}, 'expected output'), el('dd', { className: 'snippet' }, clip(c.expected_output, 4000))] : '',
          t ? [el('dt', {}, 'trajectory'), el('dd', { className: 'trajectory' }, `${t.mode || 'in_order'}, arguments ${fmtMatch(t.args_match)}: `,
            el('ol', {}, (t.expected || []).map(x => el('li', {}, el('strong', {}, clip(x.tool, 100)), x.args ? jsonView(x.args) : ''))))] : '',
          (c.assertions || []).length ? [el('dt', {}, 'assertions'), el('dd', {}, jsonView(c.assertions))] : '')));
    }
    if (!d.cases.length) cases.append(el('p', { className: 'muted' }, 'No cases.'));
    const versions = el('table', { className: 'grid', id: 'versions' },
      el('thead', {}, el('tr', {}, ['Version', 'Cases', 'Created', 'Change'].map(h => el('th', {}, h)))),
      el('tbody', {}, d.versions.map(x => el('tr', { 'data-version': String(x.version), className: x.version === d.version ? 'sel' : '' },
        el('td', {}, el('a', { href: dsLink(x.name, x.version) }, `${clip(x.name, 80)}@${x.version}`)),
        el('td', { className: 'num' }, String(x.case_count)), el('td', {}, fmtTime(x.created)), el('td', {}, clip(x.note, 200))))));
    main.append(el('h2', {}, 'Cases'), cases, el('h2', {}, 'Versions'), versions);
    main.dataset.loaded = 'true';
  }, e => { if (!ctl.signal.aborted) showError(e); });
  return () => ctl.abort();
}

function fmtMatch(m) {
  if (Array.isArray(m)) return 'fields ' + m.join(', ');
  return m || 'exact';
}

function deleteDataset(name) {
  const b = el('button', { type: 'button', id: 'delete-dataset', className: 'danger' }, 'Delete');
  b.addEventListener('click', async () => {
    if (b.dataset.armed !== 'true') { b.dataset.armed = 'true'; b.textContent = 'Delete every version?'; return; }
    b.disabled = true;
    try { await send('/api/v1/datasets/' + encodeURIComponent(name), 'DELETE'); location.hash = '#/datasets'; } catch (e) { b.disabled = false; showError(e); }
  });
  return b;
}

/** addToDatasetButton is the run view's "Add to dataset" (shown to admin
 *  keys, or when the collector requires none, as adding takes one): it opens a
 *  small form under the run's head with the case the run makes (its
 *  input, and its tool calls as the expected trajectory, editable as
 *  JSON) and saves it to the named dataset. */
export function addToDatasetButton(traceId) {
  const b = el('button', { type: 'button', id: 'add-to-dataset' }, 'Add to dataset');
  b.addEventListener('click', async () => {
    const head = b.closest('.run-head');
    const old = document.getElementById('dataset-form');
    if (old) { old.remove(); return; }
    try {
      const c = await api('/api/v1/traces/' + encodeURIComponent(traceId) + '/case');
      head.after(caseForm(c));
    } catch (e) { showError(e); }
  });
  return b;
}

function caseForm(c) {
  const name = el('input', { name: 'dataset', placeholder: 'dataset name', required: true, value: localStorage.getItem('loupe-dataset') || '' });
  const id = el('input', { name: 'id', value: c.id, size: 40 });
  const criteria = el('input', { name: 'criteria', value: c.criteria || '', size: 60, placeholder: 'what a good run does (for a judge)' });
  const traj = el('textarea', { name: 'trajectory', rows: 12, cols: 80, spellcheck: false });
  traj.value = JSON.stringify(c.trajectory || { mode: 'in_order', expected: [] }, null, 2);
  const status = el('span', { className: 'muted', id: 'dataset-status' });
  const save = el('button', { type: 'submit', id: 'dataset-save' }, 'Save');
  const form = el('form', { id: 'dataset-form', className: 'dsform' },
    el('label', {}, 'Dataset ', name), el('label', {}, 'Case id ', id), el('label', {}, 'Criteria ', criteria),
    el('label', { className: 'col' }, 'Expected trajectory (mode, args_match, expected calls with args; edit what the run should have done)', traj),
    el('div', {}, save, ' ', status));
  form.addEventListener('submit', async ev => {
    ev.preventDefault();
    let trajectory;
    try { trajectory = JSON.parse(traj.value); } catch (e) { showError(new Error('the expected trajectory is not JSON: ' + e.message)); return; }
    const kase = { ...c, id: id.value.trim(), criteria: criteria.value.trim(), trajectory };
    save.disabled = true;
    try {
      const d = await send('/api/v1/datasets/' + encodeURIComponent(name.value.trim()) + '/cases', 'POST', { cases: [kase] });
      localStorage.setItem('loupe-dataset', d.name);
      showError(null);
      status.replaceChildren('Saved as ', el('a', { href: dsLink(d.name, d.version), id: 'dataset-saved' }, `${d.name}@${d.version}`));
      form.dataset.saved = `${d.name}@${d.version}`;
    } catch (e) { showError(e); } finally { save.disabled = false; }
  });
  return form;
}
