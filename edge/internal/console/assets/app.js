import { api, reach, session, unreachable } from './api.js';
import { h, field, toast } from './ui.js';

const pages = {
  providers: () => import('./providers.js'),
  keys: () => import('./keys.js'),
  models: () => import('./models.js'),
  settings: () => import('./settings.js'),
  health: () => import('./health.js'),
  usage: () => import('./usage.js'),
  billing: () => import('./billing.js'),
};

const titles = {
  providers: 'Providers', keys: 'Keys', models: 'Models', settings: 'Settings',
  health: 'Health', usage: 'Usage', billing: 'Billing', signin: 'Sign in',
};

let cleanup = null;
let routed = false;
// navigation counts route() calls: a page that finishes loading after a
// later navigation began is dropped, so a slow page (or one for another
// machine) never replaces the page the operator moved to.
let navigation = 0;

function parseHash() {
  const raw = location.hash.replace(/^#\/?/, '');
  const [path, query = ''] = raw.split('?');
  return { page: path || 'providers', params: new URLSearchParams(query) };
}

async function route() {
  const nav = ++navigation;
  if (cleanup) { cleanup(); cleanup = null; }
  const { page, params } = parseHash();
  const main = document.getElementById('main');
  const signedIn = !!session.token;
  document.getElementById('nav').hidden = !signedIn;
  document.getElementById('signout').hidden = !signedIn;
  document.getElementById('who').textContent = signedIn ? 'signed in with the admin token' : '';
  document.getElementById('machine-box').hidden = !signedIn;
  if (signedIn) loadMachines();
  if (page === 'signin' || !signedIn) {
    document.title = 'Sign in · Switchboard';
    renderSignIn(main, params);
    return;
  }
  const load = pages[page];
  for (const a of document.querySelectorAll('nav a')) {
    if (load && a.getAttribute('href') === `#/${page}`) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  if (!load) {
    document.title = 'Not found · Switchboard';
    main.replaceChildren(h('h1', { text: 'Not found' }), h('p', {}, h('a', { href: '#/providers', text: 'Go to providers' })));
    return;
  }
  document.title = `${titles[page]} · Switchboard`;
  main.replaceChildren(h('h1', { text: titles[page] }), h('p', { class: 'muted', text: 'Loading…' }));
  try {
    // A page's module that cannot be fetched means the gateway is gone.
    const mod = await load().catch((e) => { throw e instanceof TypeError ? new Error(unreachable) : e; });
    const root = h('div');
    const c = await mod.render(root, params);
    if (nav !== navigation) {
      if (typeof c === 'function') c();
      return;
    }
    main.replaceChildren(h('h1', { text: titles[page] }), root);
    cleanup = typeof c === 'function' ? c : null;
  } catch (e) {
    if (nav !== navigation) return;
    main.replaceChildren(h('h1', { text: titles[page] }), h('p', { class: 'error', role: 'alert', text: e.message }));
  }
  // Moving between pages puts focus on the new content; the first page
  // leaves it at the top (the skip link comes first).
  if (routed) main.focus({ preventScroll: true });
  routed = true;
}

function renderSignIn(main, params) {
  const code = params.get('code');
  const input = h('input', { type: 'password', autocomplete: 'current-password', required: true });
  const err = h('p', { class: 'error', role: 'alert' });
  const done = (token) => {
    session.set(token);
    // The code is used up: keep it out of the address bar and history.
    history.replaceState(null, '', `${location.pathname}#/providers`);
    route();
  };
  const form = h('form', { class: 'card signin', 'aria-labelledby': 'signin-title' },
    h('h1', { id: 'signin-title', text: 'Sign in to Switchboard' }),
    h('p', { class: 'muted', text: 'Use the admin token (in data/admin.token), or open the one-time sign-in link that the server printed at start-up.' }),
    field('Admin token', input),
    err,
    h('button', { type: 'submit', class: 'primary', text: 'Sign in' }));
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    err.textContent = '';
    const token = input.value.trim();
    try {
      // Any admin call checks the token.
      await reach('/api/settings', { headers: { Authorization: `Bearer ${token}` } }).then((r) => {
        if (!r.ok) throw new Error(r.status === 401 ? 'That admin token is not valid.' : `The gateway answered ${r.status}.`);
      });
      done(token);
    } catch (e) {
      err.textContent = e.message;
    }
  });
  main.replaceChildren(form);
  if (session.takeRefused()) {
    err.textContent = 'The gateway refused this tab\u2019s admin token (it was changed, or the service restarted with another): sign in again.';
  }
  if (code) {
    err.textContent = '';
    const note = h('p', { role: 'status', text: 'Signing in with the one-time link…' });
    form.insertBefore(note, err);
    api('POST', '/api/console/sign-in', { code }, { auth: false })
      .then((r) => done(r.token))
      .catch((e) => {
        note.remove();
        history.replaceState(null, '', `${location.pathname}#/signin`);
        err.textContent = `${e.message}`;
      });
  } else {
    input.focus();
  }
}

let machinesLoaded = false;

// loadMachines fills the machine picker once per sign-in: the pages act on
// the chosen machine (X-Switchboard-Machine), the default one at first.
async function loadMachines() {
  if (machinesLoaded) return;
  machinesLoaded = true;
  const sel = document.getElementById('machine');
  try {
    const { machines = [] } = await api('GET', '/api/machines');
    sel.replaceChildren(...machines.map((m) => h('option', { value: m.isDefault ? '' : m.id, text: `${m.name || m.id}${m.isDefault && m.name !== 'default' ? ' (default)' : ''}` })));
    sel.value = session.machine;
    if (sel.value !== session.machine) session.setMachine('');
  } catch {
    machinesLoaded = false;
  }
}

document.getElementById('machine').addEventListener('change', (ev) => {
  session.setMachine(ev.target.value);
  toast(`Now acting on ${ev.target.selectedOptions[0]?.textContent || 'the default machine'}.`);
  route();
});

document.getElementById('signout').addEventListener('click', () => {
  session.clear();
  machinesLoaded = false;
  toast('Signed out.');
  location.hash = '#/signin';
});
window.addEventListener('hashchange', route);
route();
