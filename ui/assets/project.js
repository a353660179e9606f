// Projects: a collector keeps each team's traces apart, and the API
// answers for one project at a time. The browser's choice is the
// loupe_project cookie, which every fetch and EventSource sends (so no
// call needs to name it); the server ignores a choice the signed-in key
// may not use. A link with ?project=NAME (an alert's, say) chooses it.
import { el, clip } from './dom.js';

const cookie = 'loupe_project';

function choose(name) {
  document.cookie = `${cookie}=${encodeURIComponent(name)}; Path=/; SameSite=Strict; Max-Age=31536000`;
}

/** takeProjectFromURL moves ?project=NAME of the page's address into the
 *  cookie before the first API call, and drops it from the address. */
export function takeProjectFromURL() {
  const u = new URL(location.href);
  const p = u.searchParams.get('project');
  if (!p) return;
  choose(p);
  u.searchParams.delete('project');
  history.replaceState(null, '', u.pathname + u.search + u.hash);
}

/** showProjects fills the header's project picker from
 *  GET /api/v1/projects: hidden when there is only one project to see. */
export async function showProjects() {
  const sel = document.getElementById('project');
  const r = await fetch('/api/v1/projects', { headers: { Accept: 'application/json' } });
  if (!r.ok) { sel.hidden = true; return; }
  const body = await r.json();
  const names = (body.projects || []).map(p => String(p.name));
  sel.replaceChildren(...names.map(n => el('option', { value: n, selected: n === body.current }, clip(n, 40))));
  sel.hidden = names.length < 2;
  document.body.dataset.project = String(body.current || '');
  sel.onchange = () => {
    choose(sel.value);
    location.hash = '#/';
    location.reload();
  };
}
