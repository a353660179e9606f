// Pages beyond runs: dashboard (aggregates) and evaluations.
import { el, api, showError } from './dom.js';

export function dashboardPage(main) {
  main.append(el('p', { className: 'muted' }, 'The dashboard is not built yet; see /api/v1/aggregates.'));
  return null;
}

export function evaluationsPage(main) {
  main.append(el('p', { className: 'muted' }, 'The evaluations page is not built yet; see /api/v1/evaluations.'));
  return null;
}

export function evaluationPage(main, id) {
  api('/api/v1/evaluations/' + encodeURIComponent(id)).then(() => {}, showError);
  return null;
}
