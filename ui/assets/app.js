// Loupe's web UI: a hash router over the pages. Routes (deep links):
//   #/                      runs (filters: ?q=search&status=&name=&tag=&errors=&since=)
//   #/run/<id>?span=<sid>   one run, a span selected (or ?seq=<n>)
//   #/dashboard?since=24h   aggregates
//   #/evaluations           evaluation runs; #/evaluation/<id> one of them
import { showError } from './dom.js';
import { runsPage } from './runs.js';
import { runPage } from './run.js';
import { dashboardPage } from './dashboard.js';
import { evaluationsPage, evaluationPage } from './evaluations.js';

let current = null; // the page's cleanup function (closes streams)

function parseHash() {
  const h = location.hash.replace(/^#/, '') || '/';
  const [path, qs] = h.split('?');
  return { parts: path.split('/').filter(Boolean).map(decodeURIComponent), params: new URLSearchParams(qs || '') };
}

function route() {
  if (current) { try { current(); } catch { /* ignore */ } current = null; }
  showError(null);
  const main = document.getElementById('app');
  main.replaceChildren();
  const { parts, params } = parseHash();
  const page = parts[0] || 'runs';
  document.body.dataset.page = page;
  let cleanup;
  switch (page) {
    case 'runs': cleanup = runsPage(main, params); break;
    case 'run': cleanup = runPage(main, parts[1] || '', params); break;
    case 'dashboard': cleanup = dashboardPage(main, params); break;
    case 'evaluations': cleanup = evaluationsPage(main, params); break;
    case 'evaluation': cleanup = evaluationPage(main, parts[1] || ''); break;
    default: showError(`no such page: ${page}`);
  }
  current = cleanup || null;
}

// A run page changes its own hash (the selected span) with
// history.replaceState, which fires no hashchange: only real navigation
// re-renders.
window.addEventListener('hashchange', route);

// Light and dark: the system's choice unless the user picked one.
const saved = localStorage.getItem('loupe-theme');
const dark = saved ? saved === 'dark' : matchMedia('(prefers-color-scheme: dark)').matches;
document.documentElement.classList.toggle('dark', dark);
document.getElementById('theme').addEventListener('click', () => {
  const d = !document.documentElement.classList.contains('dark');
  document.documentElement.classList.toggle('dark', d);
  localStorage.setItem('loupe-theme', d ? 'dark' : 'light');
});

route();
