import { get, post, patch, del } from './api.js';
import { latestOnly, h, field, check, select, table, badge, toast, busy, ago, pager, safeURL, refreshFailure, focusButton, refuse } from './ui.js';

const enc = encodeURIComponent;

export async function render(root) {
  const [{ connections = [] }, { providers = [] }] = await Promise.all([get('/api/providers'), get('/api/registry/providers')]);
  const detail = h('div', { id: 'provider-detail' });
  const conns = h('section', { 'aria-labelledby': 'conns-h' });
  const draw = (list) => conns.replaceChildren(h('h2', { id: 'conns-h', text: 'Connections' }), connectionsTable(list, detail, reload));
  // A reload redraws the connections only: what is being typed in the
  // forms (a new connection, an edit, a login) stays as it is.
  const begin = latestOnly();
  async function reload() {
    const latest = begin();
    const fresh = await get('/api/providers');
    if (latest()) draw(fresh.connections || []);
  }
  draw(connections);
  root.replaceChildren(
    conns,
    detail,
    addForm(providers, reload),
    loginSection(providers, reload),
    registryTable(providers));
}

function connectionsTable(conns, detail, reload) {
  const rows = conns.map((c) => {
    const d = c.providerSpecificData || {};
    // An action on a connection deleted elsewhere (another tab, the admin
    // API) says so and drops its row, and its edit form or models if open.
    const gone = async (e) => {
      if (e.status !== 404) throw e;
      if ([...detail.children].some((x) => x.dataset.connection === c.id)) detail.replaceChildren();
      await reload();
      toast(`${c.name} was deleted elsewhere.`);
    };
    const active = h('input', { type: 'checkbox', checked: !!c.isActive, 'aria-label': `Enable ${c.name}` });
    active.addEventListener('change', async () => {
      try {
        await patch(`/api/providers/${enc(c.id)}`, { isActive: active.checked });
        toast(`${c.name} ${active.checked ? 'enabled' : 'disabled'}.`);
      } catch (e) {
        active.checked = !active.checked;
        await gone(e).catch((err) => toast(err.message));
      }
    });
    const test = h('button', { type: 'button', text: 'Test', 'aria-label': `Test ${c.name}` });
    test.addEventListener('click', () => busy(test, async () => {
      let r;
      try {
        r = await post(`/api/providers/${enc(c.id)}/test`);
      } catch (e) {
        await gone(e);
        return;
      }
      await reload();
      toast(r.valid ? `${c.name}: OK (${r.latencyMs} ms)` : `${c.name}: failed: ${r.error || r.status}`);
    }, 'Testing…'));
    const edit = h('button', { type: 'button', text: 'Edit', 'aria-label': `Edit ${c.name}`, onclick: () => { detail.replaceChildren(editForm(c, reload, gone)); detail.querySelector('input')?.focus(); } });
    const models = h('button', { type: 'button', text: 'Models', 'aria-label': `Models of ${c.name}`, onclick: () => showModels(c, detail) });
    const remove = h('button', { type: 'button', class: 'danger', text: 'Delete', 'aria-label': `Delete ${c.name}` });
    remove.addEventListener('click', () => {
      if (!confirm(`Delete the connection ${c.name}?`)) return;
      busy(remove, async () => {
        try {
          await del(`/api/providers/${enc(c.id)}`);
        } catch (e) {
          await gone(e);
          return;
        }
        // Its edit form or models, if open, go with it.
        if ([...detail.children].some((x) => x.dataset.connection === c.id)) detail.replaceChildren();
        await reload();
        toast(`${c.name} deleted.`);
      });
    });
    const t = c.lastTest;
    return h('tr', {},
      h('td', {}, h('strong', { text: c.name }), h('div', { class: 'muted', text: c.id })),
      h('td', { text: c.provider }),
      h('td', { text: d.prefix || '' }),
      h('td', { class: 'num', text: c.priority }),
      h('td', {}, check('Active', active)),
      h('td', {}, c.needsRelogin ? badge('needs re-login', 'bad') : badge(c.authType || 'apikey'), refreshFailure(c)),
      h('td', {}, t && t.testedAt ? badge(t.ok ? `OK ${ago(t.testedAt)}` : `failed ${ago(t.testedAt)}`, t.ok ? 'ok' : 'bad') : h('span', { class: 'muted', text: 'not tested' })),
      h('td', {}, h('div', { class: 'actions' }, test, edit, models, remove)));
  });
  return table(['Name', 'Provider', 'Prefix', ['Priority', 'num'], 'State', 'Auth', 'Last test', 'Actions'], rows, 'Connections');
}

function editForm(c, reload, gone) {
  const d = c.providerSpecificData || {};
  const name = h('input', { value: c.name, required: true });
  const priority = h('input', { type: 'number', min: 1, value: c.priority });
  const apiKey = h('input', { type: 'password', autocomplete: 'off', placeholder: c.hasApiKey ? 'unchanged' : '' });
  const baseUrl = h('input', { type: 'url', value: d.baseUrl || '' });
  const prefix = h('input', { value: d.prefix || '' });
  const enabled = h('textarea', { rows: 2, text: (d.enabledModels || []).join(', ') });
  const proxy = h('input', { value: d.proxyUrl || '' });
  const caveman = select(cavemanChoices, cavemanChoice(d.caveman));
  const cavemanWas = caveman.value;
  const refused = h('p', { class: 'error', role: 'alert' });
  const form = h('form', { class: 'card', 'aria-labelledby': 'edit-h', 'data-connection': c.id },
    h('h2', { id: 'edit-h', text: `Edit ${c.name}` }),
    h('div', { class: 'row' }, field('Name', name), field('Priority', priority), field('API key', apiKey, 'Leave blank to keep the stored key.')),
    h('div', { class: 'row' }, field('Base URL', baseUrl), field('Prefix', prefix), field('Proxy URL', proxy)),
    h('div', { class: 'row' }, field('Enabled models', enabled, 'Comma-separated; empty lists every model.'),
      field('Terse answers (caveman)', caveman, 'For this connection, over the machine\u2019s setting (Settings).')),
    refused,
    h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary', text: 'Save' }),
      h('button', { type: 'button', text: 'Cancel', onclick: () => { form.remove(); focusButton(`Edit ${c.name}`); } })));
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    // Only the fields changed here are sent: what another tab (or the
    // admin API) changed meanwhile in the others stays. A stored caveman
    // setting the choices do not show (a level without on or off) stays too.
    const body = {};
    const data = {};
    if (name.value.trim() !== c.name) body.name = name.value.trim();
    if ((Number(priority.value) || 1) !== c.priority) body.priority = Number(priority.value) || 1;
    if (apiKey.value) body.apiKey = apiKey.value;
    if (baseUrl.value.trim() !== (d.baseUrl || '')) data.baseUrl = baseUrl.value.trim();
    if (prefix.value.trim() !== (d.prefix || '')) data.prefix = prefix.value.trim();
    if (proxy.value.trim() !== (d.proxyUrl || '')) data.proxyUrl = proxy.value.trim();
    const models = splitList(enabled.value);
    if (models.join(',') !== (d.enabledModels || []).join(',')) data.enabledModels = models;
    if (caveman.value !== cavemanWas) data.caveman = cavemanOverride(caveman.value);
    if (Object.keys(data).length) body.providerSpecificData = data;
    refused.textContent = '';
    busy(form.querySelector('[type=submit]'), async () => {
      let r;
      try {
        r = await patch(`/api/providers/${enc(c.id)}`, body);
      } catch (e) {
        if (e.status === 404) {
          await gone(e);
          return;
        }
        refuse(refused)(e);
      }
      const saved = r?.connection?.name || body.name || c.name;
      form.remove();
      await reload();
      focusButton(`Edit ${saved}`);
      // Told once the list shows it, and the focus is back.
      toast(`${saved} saved.`);
    }, 'Saving…');
  });
  return form;
}

// A connection's caveman override (providerSpecificData.caveman): none
// (the machine's setting), off, or on at a level.
const cavemanChoices = [['', 'As this machine\u2019s setting'], ['off', 'Off'],
  ...['lite', 'full', 'ultra', 'wenyan-lite', 'wenyan', 'wenyan-ultra'].map((l) => [l, `On: ${l}`])];

function cavemanChoice(o) {
  if (o?.enabled === false) return 'off';
  if (o?.enabled === true) return o.level || 'full';
  return '';
}

function cavemanOverride(choice) {
  if (choice === '') return {};
  if (choice === 'off') return { enabled: false };
  return { enabled: true, level: choice };
}

function splitList(s) {
  return s.split(/[\s,]+/).map((x) => x.trim()).filter(Boolean);
}

async function showModels(c, detail) {
  const status = h('p', { role: 'status', class: 'muted', text: 'Fetching the models…' });
  const list = h('div');
  const refresh = h('button', { type: 'button', text: 'Refresh the catalog' });
  const box = h('section', { class: 'card', 'aria-labelledby': 'models-h', 'aria-busy': 'true', 'data-connection': c.id },
    h('h2', { id: 'models-h', tabindex: -1, text: `Models of ${c.name}` }), h('div', { class: 'actions' }, refresh), status, list);
  detail.replaceChildren(box);
  const load = async (path, method) => {
    box.setAttribute('aria-busy', 'true');
    status.replaceChildren(h('progress', { 'aria-label': 'Fetching the models' }), ' Fetching the models from the upstream…');
    try {
      const r = method === 'POST' ? await post(path) : await get(path);
      const models = r.models || [];
      status.textContent = `${models.length} models${r.warning ? ` (${r.warning})` : ''}.`;
      list.replaceChildren(pager(models, 100, (page) => table(['Model', 'Kind'],
        page.map((m) => h('tr', {}, h('td', { text: m.id }), h('td', { text: m.kind }))), `Models of ${c.name}`)));
    } catch (e) {
      status.textContent = `Could not list the models: ${e.message}`;
    } finally {
      box.removeAttribute('aria-busy');
    }
  };
  refresh.addEventListener('click', () => busy(refresh, () => load(`/api/providers/${enc(c.id)}/models/refresh`, 'POST'), 'Refreshing…'));
  await load(`/api/providers/${enc(c.id)}/models`, 'GET');
  box.querySelector('h2').focus();
}

function addForm(providers, reload) {
  const apiProviders = providers.filter((p) => p.auth === 'apikey');
  const provider = select(apiProviders.map((p) => [p.id, p.family ? `${p.id} (any compatible server)` : p.id]));
  const suffix = h('input', { placeholder: 'local', pattern: '[a-z0-9]+(-[a-z0-9]+)*' });
  const suffixField = field('Suffix', suffix, 'The connection\u2019s provider is <family>-<suffix>.');
  const name = h('input', { required: true });
  const apiKey = h('input', { type: 'password', autocomplete: 'off' });
  const baseUrl = h('input', { type: 'url', placeholder: 'http://127.0.0.1:11434/v1' });
  const prefix = h('input');
  const priority = h('input', { type: 'number', min: 1, value: 1 });
  const enabled = h('textarea', { rows: 2 });
  const proxy = h('input');
  const result = h('p', { role: 'status' });
  const refused = h('p', { class: 'error', role: 'alert' });
  const sync = () => {
    const p = apiProviders.find((x) => x.id === provider.value);
    suffixField.hidden = !p?.family;
    baseUrl.required = !!p?.baseUrlRequired;
    baseUrl.placeholder = p?.defaultBaseUrl || 'http://127.0.0.1:11434/v1';
  };
  provider.addEventListener('change', sync);
  sync();
  const providerID = () => {
    const p = apiProviders.find((x) => x.id === provider.value);
    return p?.family ? `${p.family}-${suffix.value.trim() || 'default'}` : provider.value;
  };
  const data = () => ({ baseUrl: baseUrl.value.trim(), prefix: prefix.value.trim(), proxyUrl: proxy.value.trim(), enabledModels: splitList(enabled.value) });
  const validate = h('button', { type: 'button', text: 'Validate' });
  validate.addEventListener('click', () => busy(validate, async () => {
    const r = await post('/api/providers/validate', { provider: providerID(), apiKey: apiKey.value, providerSpecificData: data() });
    result.textContent = r.valid ? `Valid (${r.latencyMs} ms).` : `Not valid: ${r.error || r.status}`;
    result.className = r.valid ? '' : 'error';
  }, 'Validating…'));
  const form = h('form', { class: 'card', 'aria-labelledby': 'add-h' },
    h('h2', { id: 'add-h', text: 'Add a connection' }),
    h('div', { class: 'row' }, field('Provider', provider), suffixField, field('Name', name)),
    h('div', { class: 'row' }, field('API key', apiKey), field('Base URL', baseUrl), field('Prefix', prefix), field('Priority', priority)),
    h('div', { class: 'row' }, field('Enabled models', enabled, 'Comma-separated; empty lists every model.'), field('Proxy URL', proxy)),
    result,
    refused,
    h('div', { class: 'actions' }, validate, h('button', { type: 'submit', class: 'primary', text: 'Add connection' })));
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    refused.textContent = '';
    busy(form.querySelector('[type=submit]'), async () => {
      const r = await post('/api/providers', {
        provider: providerID(), name: name.value.trim(), apiKey: apiKey.value,
        priority: Number(priority.value) || 1, providerSpecificData: data(),
      }).catch(refuse(refused));
      form.reset();
      result.textContent = '';
      sync();
      await reload();
      toast(`Added ${r.connection.name}.`);
    }, 'Adding…');
  });
  return form;
}

function loginSection(providers, reload) {
  const logins = providers.filter((p) => p.auth === 'device' || p.auth === 'authorization');
  const out = h('div', { 'aria-live': 'polite' });
  const buttons = logins.map((p) => {
    const b = h('button', { type: 'button', text: `Log in to ${p.id}` });
    b.addEventListener('click', () => (p.auth === 'device' ? deviceLogin(p, out, reload, b) : codeLogin(p, out, reload, b)));
    return b;
  });
  return h('section', { class: 'card', 'aria-labelledby': 'login-h' },
    h('h2', { id: 'login-h', text: 'Subscription logins (OAuth)' }),
    logins.length ? h('div', { class: 'actions' }, buttons) : h('p', { class: 'muted', text: 'No OAuth providers.' }),
    out);
}

async function deviceLogin(p, out, reload, opener) {
  let stopped = false;
  const status = h('p', { role: 'status', text: 'Asking the provider for a code…' });
  const cancel = h('button', { type: 'button', text: 'Cancel', onclick: () => { stopped = true; out.replaceChildren(); opener.focus(); } });
  const box = h('section', { class: 'card', 'aria-labelledby': 'device-h' }, h('h3', { id: 'device-h', text: `Log in to ${p.id}` }), status, cancel);
  out.replaceChildren(box);
  let start;
  try {
    start = await post(`/api/oauth/${enc(p.id)}/device-code`, { name: p.id });
  } catch (e) {
    status.textContent = `Could not start: ${e.message}`;
    return;
  }
  const link = safeURL(start.verificationUriComplete || start.verificationUri);
  if (!link) {
    status.textContent = 'The provider sent no usable verification address.';
    return;
  }
  const progress = h('progress', { 'aria-label': 'Waiting for the login' });
  box.insertBefore(h('div', {},
    h('p', {}, 'Open ', h('a', { href: link, target: '_blank', rel: 'noopener noreferrer', text: link }), ' and enter the user code there.'),
    // The code says what it is in text, which a screen reader reads with it.
    h('p', {}, 'User code: ', h('strong', { class: 'code', text: start.userCode })),
    progress), status);
  status.textContent = 'Waiting for you to approve the login…';
  let interval = Math.max(1, start.interval || 5);
  const deadline = Date.now() + (start.expiresIn || 900) * 1000;
  // A login replaced by another (its box no longer in the logins' output)
  // stops; one left running on another page goes on, to finish there.
  const replaced = () => !out.contains(box);
  while (!stopped && !replaced() && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, interval * 1000));
    if (stopped || replaced()) return;
    let r;
    try {
      r = await post(`/api/oauth/${enc(p.id)}/poll`, { flowId: start.flowId });
    } catch (e) {
      status.textContent = `Polling failed: ${e.message}`;
      progress.remove();
      return;
    }
    if (r.interval) interval = r.interval;
    if (r.status === 'complete') {
      progress.remove();
      status.textContent = loggedIn(r, p);
      toast(`Logged in to ${p.id}.`);
      setTimeout(() => reload().catch((e) => toast(e.message)), 1500);
      return;
    }
    if (r.status === 'denied' || r.status === 'expired') {
      progress.remove();
      status.textContent = `The login ${r.status === 'denied' ? 'was denied' : 'expired'}${r.error ? ` (${r.error})` : ''}.`;
      return;
    }
    status.textContent = r.status === 'slow_down' ? 'Waiting (the provider asked to poll slower)…' : 'Waiting for you to approve the login…';
  }
  if (!stopped && !replaced()) { progress.remove(); status.textContent = 'The code expired.'; }
}

async function codeLogin(p, out, reload, opener) {
  const status = h('p', { role: 'status', text: 'Preparing the login…' });
  const box = h('section', { class: 'card', 'aria-labelledby': 'authorize-h' }, h('h3', { id: 'authorize-h', text: `Log in to ${p.id}` }), status);
  out.replaceChildren(box);
  let start;
  try {
    start = await post(`/api/oauth/${enc(p.id)}/authorize`, { name: p.id });
  } catch (e) {
    status.textContent = `Could not start: ${e.message}`;
    return;
  }
  const authorizeUrl = safeURL(start.authorizeUrl);
  if (!authorizeUrl) {
    status.textContent = 'The login has no usable sign-in address.';
    return;
  }
  // A loopback redirect (Codex's) sends the browser to an address nothing
  // answers on: its address is pasted. A provider's own callback page
  // (Claude's) shows the code (code#state) to copy.
  const loopback = isLoopback(start.redirectUri);
  status.textContent = loopback
    ? 'Open the link, sign in, then paste the address your browser lands on (or the code) here.'
    : 'Open the link, sign in, then paste the code it shows at the end here.';
  const pasted = h('input', { required: true, autocomplete: 'off' });
  const refused = h('p', { class: 'error', role: 'alert' });
  const form = h('form', {},
    h('p', {}, h('a', { href: authorizeUrl, target: '_blank', rel: 'noopener noreferrer', text: `Open the ${p.id} sign-in page` })),
    loopback
      ? field('Redirect address or code', pasted, `It starts with ${start.redirectUri}`)
      : field('Code', pasted, `The page at ${start.redirectUri} shows it after the sign-in (its address works too)`),
    refused,
    h('button', { type: 'submit', class: 'primary', text: 'Finish login' }));
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    let code = pasted.value.trim();
    let state = '';
    try {
      const u = new URL(code);
      code = u.searchParams.get('code') || '';
      state = u.searchParams.get('state') || '';
    } catch { /* a bare code */ }
    refused.textContent = '';
    busy(form.querySelector('[type=submit]'), async () => {
      const r = await post(`/api/oauth/${enc(p.id)}/exchange`, { flowId: start.flowId, code, state }).catch(refuse(refused));
      status.textContent = loggedIn(r, p);
      form.remove();
      opener.focus();
      setTimeout(() => reload().catch((e) => toast(e.message)), 1500);
    }, 'Finishing…');
  });
  box.append(form);
}

// loggedIn says what a completed login did: a connection added, or an
// existing one (of the same account, or the one awaiting a new login)
// renewed with its settings kept.
function loggedIn(r, p) {
  const name = r.connection?.name || p.id;
  return r.renewed
    ? `Logged in again: the connection ${name} was renewed, its settings kept.`
    : `Logged in: the connection ${name} was added.`;
}

// isLoopback tells whether a redirect URI is an http address on this
// machine, which a browser sign-in ends on without a page to show.
function isLoopback(raw) {
  try {
    const u = new URL(raw);
    return u.protocol === 'http:' && ['localhost', '127.0.0.1', '[::1]'].includes(u.hostname);
  } catch {
    return false;
  }
}

function registryTable(providers) {
  const rows = providers.map((p) => h('tr', {},
    h('td', { text: p.id }), h('td', { text: p.alias || '' }),
    h('td', { text: p.auth === 'apikey' ? 'API key' : p.auth === 'device' ? 'device code' : 'browser login' }),
    h('td', { text: p.baseUrlRequired ? 'required' : (p.defaultBaseUrl || '') }),
    h('td', { text: (p.kinds || []).join(', ') })));
  return h('details', { class: 'card' }, h('summary', { text: `The registry: ${providers.length} providers and their fields` }),
    table(['Provider', 'Model prefix', 'Sign-in', 'Base URL', 'Kinds'], rows, 'Provider registry'));
}
