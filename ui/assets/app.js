// Loupe's web UI: a hash router over the pages. Routes (deep links):
//   #/                      runs (filters: ?q=search&status=&name=&tag=&model=&tool=&errors=&since=&until=)
//   #/run/<id>?span=<sid>   one run, a span selected (or ?seq=<n>)
//   #/dashboard?since=24h   aggregates
//   #/evaluations           evaluation runs; #/evaluation/<id> one of them
//   #/sessions?user=&since= sessions; #/session/<id> one as its conversation
//   #/datasets              datasets; #/dataset/<name>?version=N one version
//   #/experiments?dataset=  experiments; #/compare?a=&b= two experiments compared;
//   #/alerts                monitors and their firings
//   #/compare/<a>/<b>       two runs side by side (a branch and its original, a case in two experiments), the first divergence marked

//   #/rules                 online evaluation rules
// On a collector that requires API keys, the sign-in form stands in for
// every page until a key is given (session.js); the route is kept, so a
// deep link opens after signing in.
import { showError } from './dom.js';
import { whoAmI, whoLabel, signInForm, signOut } from './session.js';
import { takeProjectFromURL, showProjects } from './project.js';
import { runsPage } from './runs.js';
import { runPage } from './run.js';
import { dashboardPage } from './dashboard.js';
import { evaluationsPage, evaluationPage } from './evaluations.js';
import { sessionsPage, sessionPage } from './sessions.js';
import { datasetsPage, datasetPage } from './datasets.js';
import { experimentsPage, comparePage } from './experiments.js';
import { alertsPage } from './alerts.js';
import { comparePage as runsComparePage } from './compare.js';

import { rulesPage } from './rules.js';

let current = null; // the page's cleanup function (closes streams)
let signedIn = false;

function leave() {
  if (current) { try { current(); } catch { /* ignore */ } current = null; }
}

function parseHash() {
  const h = location.hash.replace(/^#/, '') || '/';
  const [path, qs] = h.split('?');
  return { parts: path.split('/').filter(Boolean).map(decodeURIComponent), params: new URLSearchParams(qs || '') };
}

function route() {
  if (!signedIn) return; // the sign-in form stays until a key is given
  leave();
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
    case 'sessions': cleanup = sessionsPage(main, params); break;
    case 'session': cleanup = sessionPage(main, parts[1] || ''); break;
    case 'datasets': cleanup = datasetsPage(main); break;
    case 'dataset': cleanup = datasetPage(main, parts[1] || '', params); break;
    case 'experiments': cleanup = experimentsPage(main, params); break;
    // #/compare/<a>/<b> compares two runs; #/compare?a=&b= two experiments.
    case 'compare': cleanup = parts[1] ? runsComparePage(main, parts[1], parts[2] || '') : comparePage(main, params); break;
    case 'alerts': cleanup = alertsPage(main, params); break;

    case 'rules': cleanup = rulesPage(main); break;
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

// showWho puts who is signed in, and the sign-out button, in the header.
function showWho(w) {
  const label = whoLabel(w);
  const who = document.getElementById('who');
  who.textContent = label;
  who.hidden = !label;
  document.getElementById('signout').hidden = !label;
  document.body.dataset.auth = label ? (w.scope || 'in') : 'open';
}

function onSignedIn(w) {
  signedIn = true;
  showWho(w);
  showProjects().catch(showError);
  route();
}

// showSignIn replaces the page with the sign-in form; message says why
// (a session that ended).
function showSignIn(message) {
  signedIn = false;
  leave();
  showError(null);
  showWho(null);
  document.body.dataset.auth = 'out';
  document.body.dataset.page = 'signin';
  document.getElementById('app').replaceChildren(signInForm(onSignedIn, message));
}

async function start() {
  takeProjectFromURL();
  try {
    const w = await whoAmI();
    if (w) onSignedIn(w); else showSignIn();
  } catch (e) { showError(e); }
}

// Any API call answered 401: the session ended (expired, signed out in
// another tab, its key revoked).
window.addEventListener('loupe:unauthorized', e => {
  if (!signedIn) return;
  const why = String(e.detail || '');
  showSignIn(why.includes('session') ? why : 'The session has ended: sign in again.');
});
// A live stream refused for good: still signed in?
window.addEventListener('loupe:stream-closed', async () => {
  if (!signedIn) return;
  try { if (!await whoAmI()) showSignIn('The session has ended: sign in again.'); } catch { /* the server is away; EventSource said so */ }
});
document.getElementById('signout').addEventListener('click', async () => {
  try { await signOut(); } catch (e) { showError(e); return; }
  showSignIn();
});

start();
