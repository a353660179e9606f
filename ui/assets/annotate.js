// The run page's annotations: a person scores the run, or the span
// selected in the tree, with thumbs up or down, or a value of a
// configured score (its range or categories), with a comment; and every
// score of the run is listed. Keys (while no text field has the focus):
//   +  thumbs up     -  thumbs down     c  write a comment
//   a  annotate the whole run or the selected span (toggle)
//   Escape (in the comment) back to the span tree
import { el, showError, clip, fmtTime } from './dom.js';
import { addScore, scoresOf, configs, valueText } from './scores.js';
import { canDelete } from './session.js';

export const THUMBS = 'thumbs';

/** annotatePanel returns the panel for trace id; selected() gives the
 *  span selected in the tree ({id, name, root}). Its key listener goes
 *  when signal is aborted (the page is left). */
export function annotatePanel(id, selected, signal) {
  let onSpan = false; // annotate the selected span, else the whole run
  let wantComment = false; // c went down; the comment takes the focus when it goes up
  const target = el('span', { id: 'annotate-target', className: 'muted' });
  const showTarget = () => {
    const s = selected();
    const span = onSpan && s && !s.root;
    target.textContent = span ? `span ${clip(s.name || s.id, 40)}` : 'the whole run';
    target.dataset.span = span ? s.id : '';
  };
  const toggle = el('button', { type: 'button', id: 'annotate-toggle', title: 'annotate the whole run or the selected span (key a)' }, 'run/span');
  toggle.addEventListener('click', () => { onSpan = !onSpan; showTarget(); });
  const comment = el('textarea', { id: 'annotate-comment', rows: 1, placeholder: 'comment (key c), sent with the next score', maxLength: 16000 });
  const up = el('button', { type: 'button', id: 'thumbs-up', title: 'thumbs up (key +)', 'aria-label': 'thumbs up' }, '▲ good');
  const down = el('button', { type: 'button', id: 'thumbs-down', title: 'thumbs down (key -)', 'aria-label': 'thumbs down' }, '▼ bad');
  const nameSel = el('select', { id: 'annotate-name', 'aria-label': 'score' });
  const valueBox = el('span', { id: 'annotate-value' });
  const give = el('button', { type: 'submit', id: 'annotate-give' }, 'Score');
  const form = el('form', { className: 'annotate-form', id: 'annotate-form' }, nameSel, valueBox, give);
  const list = el('tbody', { id: 'annotations-body' });
  const table = el('table', { className: 'grid', id: 'annotations' },
    el('thead', {}, el('tr', {}, ['Score', 'Value', 'On', 'Source', 'Author', 'Comment', 'Time'].map(h => el('th', {}, h)))), list);
  const none = el('p', { className: 'muted', id: 'no-annotations' }, 'No scores yet.');
  const panel = el('section', { className: 'annotate', id: 'annotate', 'aria-label': 'annotations' },
    el('div', { className: 'annotate-bar' }, el('strong', {}, 'Annotate'), target, toggle, up, down, form, comment,
      el('span', { className: 'muted keys' }, 'keys: + − thumbs · c comment · a run/span')),
    table, none);
  // Adding scores takes an admin key in the UI (its sign-in takes read
  // and admin keys; read keys only read): a read key sees the scores.
  const mayScore = canDelete();
  if (!mayScore) panel.querySelector('.annotate-bar').replaceChildren(el('strong', {}, 'Scores'),
    el('span', { className: 'muted' }, 'sign in with an admin key to annotate'));

  let cfgs = new Map();
  const valueInput = () => {
    const c = cfgs.get(nameSel.value);
    if (!c) return null;
    if (c.kind === 'categorical') return el('select', { name: 'value', 'aria-label': 'value' }, (c.categories || []).map(x => el('option', { value: x }, clip(x, 60))));
    if (c.kind === 'boolean') return el('select', { name: 'value', 'aria-label': 'value' }, el('option', { value: 'true' }, 'true'), el('option', { value: 'false' }, 'false'));
    const inp = el('input', { name: 'value', type: 'number', step: 'any', required: true, 'aria-label': 'value', size: 6 });
    if (c.min !== undefined) inp.min = c.min;
    if (c.max !== undefined) inp.max = c.max;
    inp.placeholder = c.min !== undefined && c.max !== undefined ? `${c.min}–${c.max}` : 'value';
    return inp;
  };
  nameSel.addEventListener('change', () => valueBox.replaceChildren(valueInput() || ''));

  const refresh = async () => {
    const got = await scoresOf([id], '', signal);
    list.replaceChildren(...got.map(s => el('tr', { 'data-score-id': s.id, 'data-name': s.name },
      el('td', {}, clip(s.name, 60)), el('td', { className: 'value' }, valueText(s)),
      el('td', {}, s.span_id ? el('a', { href: `#/run/${encodeURIComponent(id)}?span=${encodeURIComponent(s.span_id)}` }, 'span ' + s.span_id) : 'run'),
      el('td', {}, s.source), el('td', {}, clip(s.author, 40)), el('td', { className: 'comment', title: clip(s.comment, 2000) }, clip(s.comment, 120)),
      el('td', {}, fmtTime(s.time)))));
    none.hidden = got.length > 0;
    panel.dataset.count = String(got.length);
  };

  const post = async (score) => {
    const s = selected();
    const body = { trace_id: id, ...score };
    if (onSpan && s && !s.root) body.span_id = s.id;
    if (comment.value.trim()) body.comment = comment.value.trim();
    try {
      await addScore(body, signal);
      comment.value = '';
      await refresh();
      panel.dataset.added = String(Number(panel.dataset.added || 0) + 1);
    } catch (e) { if (!signal.aborted) showError(e); }
  };
  up.addEventListener('click', () => post({ name: THUMBS, kind: 'boolean', value: true }));
  down.addEventListener('click', () => post({ name: THUMBS, kind: 'boolean', value: false }));
  form.addEventListener('submit', e => {
    e.preventDefault();
    const c = cfgs.get(nameSel.value), inp = form.elements.value;
    if (!c || !inp) return;
    if (c.kind === 'categorical') post({ name: c.name, kind: c.kind, category: inp.value });
    else if (c.kind === 'boolean') post({ name: c.name, kind: c.kind, value: inp.value === 'true' });
    else post({ name: c.name, kind: c.kind, value: Number(inp.value) });
  });
  comment.addEventListener('keydown', e => {
    if (e.key === 'Escape') { comment.blur(); const t = document.getElementById('tree'); if (t) t.focus(); }
    if (e.key === 'Enter' && !e.shiftKey) { e.preventDefault(); comment.blur(); const t = document.getElementById('tree'); if (t) t.focus(); }
  });
  document.addEventListener('keydown', e => {
    if (!mayScore || e.ctrlKey || e.metaKey || e.altKey) return;
    const t = e.target;
    if (t && (t.tagName === 'INPUT' || t.tagName === 'TEXTAREA' || t.tagName === 'SELECT' || t.isContentEditable)) return;
    switch (e.key) {
      case '+': case '=': e.preventDefault(); up.click(); break;
      case '-': case '_': e.preventDefault(); down.click(); break;
      // The comment gets the focus when c is released: focused on
      // keydown, it would receive the c itself.
      case 'c': e.preventDefault(); wantComment = true; break;
      case 'a': e.preventDefault(); toggle.click(); break;
      default: return;
    }
  }, { signal });
  document.addEventListener('keyup', e => {
    if (e.key === 'c' && wantComment) { wantComment = false; comment.focus(); }
  }, { signal });
  document.addEventListener('loupe:span-selected', showTarget, { signal });
  showTarget();

  (async () => {
    try {
      cfgs = await configs(signal);
      const names = [...cfgs.keys()].filter(n => n !== THUMBS);
      form.hidden = !names.length;
      nameSel.replaceChildren(...names.map(n => el('option', { value: n, title: clip(cfgs.get(n).description, 500) }, clip(n, 40))));
      valueBox.replaceChildren(valueInput() || '');
      await refresh();
      panel.dataset.loaded = 'true';
    } catch (e) { if (!signal.aborted) showError(e); }
  })();
  return panel;
}
