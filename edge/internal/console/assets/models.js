import { get, post, put, del, qs, reach, session } from './api.js';
import { latestOnly, h, field, table, toast, busy, pager, refuse } from './ui.js';

const kinds = ['llm', 'embedding', 'image', 'tts', 'stt', 'video', 'music'];

async function listModels(resp, disabled, aliases, combos) {
  // /v1/models (resp) answers for the default machine without a key; with
  // keys required, or for another machine (the picker's), fall back to
  // each connection's own list, kept to what the gateway serves: active
  // connections, their enabled models (all when none are), not the
  // disabled ones, and the aliases and combos.
  if (resp?.ok) return { models: (await resp.json()).data || [], note: '' };
  const { connections = [] } = await get('/api/providers');
  const lists = await Promise.all(connections.filter((c) => c.isActive).map((c) => get(`/api/providers/${encodeURIComponent(c.id)}/models`)
    .then((r) => {
      const d = c.providerSpecificData || {};
      const alias = d.prefix || c.provider;
      const enabled = d.enabledModels?.length ? new Set(d.enabledModels) : null;
      const off = new Set(disabled[alias] || []);
      return (r.models || []).filter((m) => (!enabled || enabled.has(m.id)) && !off.has(m.id))
        .map((m) => ({ id: `${alias}/${m.id}`, kind: m.kind, owned_by: c.name }));
    })
    .catch(() => [])));
  const models = lists.flat();
  const kindOf = (id) => models.find((m) => m.id === id)?.kind;
  for (const c of combos) models.push({ id: c.name, kind: kindOf(c.models?.[0]) || 'llm', owned_by: 'combo' });
  for (const [name, target] of Object.entries(aliases)) models.push({ id: name, kind: kindOf(target) || 'llm', owned_by: 'alias' });
  return { models, note: resp ? 'Listed from each connection (the gateway requires API keys for /v1/models).' : 'Listed from each connection of this machine.' };
}

// The page is drawn once: a reload (after an action) redraws what the
// gateway lists, the models, the disabled ones, the aliases and the
// combos, and leaves the filter, the kind, what is being typed in the
// forms, and the focus, as they are.
export async function render(root) {
  const list = listing(reload);
  const off = disabledSection(reload);
  const aliases = aliasSection(reload);
  const combos = comboSection(reload);
  const begin = latestOnly();
  async function reload() {
    const latest = begin();
    const [listed, disabled, a, c] = await Promise.all([
      session.machine ? null : reach('/v1/models'), get('/api/models/disabled'), get('/api/models/aliases'), get('/api/models/combos')]);
    const { models, note } = await listModels(listed, disabled.disabled || {}, a.aliases || {}, c.combos || []);
    if (!latest()) return;
    list.show(models, note);
    off.show(disabled.disabled || {});
    aliases.show(a.aliases || {});
    combos.show(c.combos || []);
  }
  await reload();
  root.replaceChildren(list.el, off.el, aliases.el, combos.el);
}

// redraw replaces what el shows; a button in it that had the focus hands
// it to the new button of the same name, where it would drop to the
// page's body.
function redraw(el, ...children) {
  const had = el.contains(document.activeElement) ? document.activeElement : null;
  const name = had && (had.getAttribute('aria-label') || had.textContent);
  el.replaceChildren(...children);
  if (had && !had.isConnected) [...el.querySelectorAll('button')].find((b) => (b.getAttribute('aria-label') || b.textContent) === name)?.focus();
}

function listing(reload) {
  let models = [];
  let kind = '';
  const filter = h('input', { type: 'search', placeholder: 'filter by id' });
  const note = h('p', { class: 'muted', hidden: true });
  const body = h('div');
  const tabs = h('div', { class: 'tabs', role: 'group', 'aria-label': 'Kind' });
  const draw = () => {
    const f = filter.value.trim().toLowerCase();
    const shown = models.filter((m) => (!kind || (m.kind || 'llm') === kind) && (!f || m.id.toLowerCase().includes(f)));
    redraw(body, pager(shown, 50, (page) => table(['Model', 'Kind', 'Owner', 'Actions'], page.map((m) => {
      // Aliases and combos are not disabled but changed in their sections.
      const own = { alias: 'Aliases', combo: 'Combos' }[m.owned_by];
      if (own || !m.id.includes('/')) {
        return h('tr', {}, h('td', { text: m.id }), h('td', { text: m.kind || 'llm' }), h('td', { text: m.owned_by || '' }),
          h('td', { class: 'muted', text: own ? `see ${own}` : '' }));
      }
      const off = h('button', { type: 'button', text: 'Disable', 'aria-label': `Disable ${m.id}` });
      off.addEventListener('click', () => busy(off, async () => {
        const i = m.id.indexOf('/');
        await post('/api/models/disabled', { providerAlias: m.id.slice(0, i), ids: [m.id.slice(i + 1)] });
        await reload();
        toast(`${m.id} disabled.`);
      }));
      return h('tr', {}, h('td', { text: m.id }), h('td', { text: m.kind || 'llm' }), h('td', { text: m.owned_by || '' }), h('td', {}, off));
    }), 'Models')));
  };
  const tab = (k, label) => {
    const b = h('button', { type: 'button', 'aria-pressed': String(k === kind), 'data-kind': k, text: label });
    b.addEventListener('click', () => {
      kind = k;
      for (const x of tabs.children) x.setAttribute('aria-pressed', String(x === b));
      draw();
    });
    return b;
  };
  filter.addEventListener('input', draw);
  const show = (fresh, text) => {
    models = fresh;
    note.textContent = text;
    note.hidden = !text;
    const counts = {};
    for (const m of models) counts[m.kind || 'llm'] = (counts[m.kind || 'llm'] || 0) + 1;
    // A kind none of the models has any more shows them all.
    if (!counts[kind]) kind = '';
    // The tabs' names carry their counts: the focus goes to the same kind's.
    const had = tabs.contains(document.activeElement) ? document.activeElement.dataset.kind : null;
    tabs.replaceChildren(tab('', `All (${models.length})`), ...kinds.filter((k) => counts[k]).map((k) => tab(k, `${k} (${counts[k]})`)));
    if (had !== null) (tabs.querySelector(`[data-kind="${had}"]`) || tabs.firstChild).focus();
    draw();
  };
  const el = h('section', { 'aria-labelledby': 'list-h' }, h('h2', { id: 'list-h', text: 'Models by kind' }),
    note, tabs, field('Filter models', filter), body);
  return { el, show };
}

function disabledSection(reload) {
  const heading = h('h2', { id: 'dis-h' });
  const body = h('div');
  const show = (disabled) => {
    const rows = [];
    for (const [alias, ids] of Object.entries(disabled)) {
      for (const id of ids || []) {
        const on = h('button', { type: 'button', text: 'Enable', 'aria-label': `Enable ${alias}/${id}` });
        on.addEventListener('click', () => busy(on, async () => {
          await del(`/api/models/disabled${qs({ providerAlias: alias, id })}`);
          await reload();
          toast(`${alias}/${id} enabled.`);
        }));
        rows.push(h('tr', {}, h('td', { text: `${alias}/${id}` }), h('td', {}, on)));
      }
    }
    heading.textContent = `Disabled models (${rows.length})`;
    redraw(body, table(['Model', 'Actions'], rows, 'Disabled models'));
  };
  return { el: h('section', { 'aria-labelledby': 'dis-h' }, heading, body), show };
}

// The aliases and the combos are each written whole: a change is made to
// the ones stored now, not to those the page was drawn with, so what
// another tab (or the admin API) saved meanwhile is kept.
const storedAliases = async () => (await get('/api/models/aliases')).aliases || {};
const storedCombos = async () => (await get('/api/models/combos')).combos || [];

function aliasSection(reload) {
  const body = h('div');
  const show = (aliases) => redraw(body, table(['Alias', 'Model', 'Actions'], Object.entries(aliases).map(([name, target]) => {
    const rm = h('button', { type: 'button', class: 'danger', text: 'Remove', 'aria-label': `Remove alias ${name}` });
    rm.addEventListener('click', () => busy(rm, async () => {
      const next = await storedAliases();
      delete next[name];
      await put('/api/models/aliases', { aliases: next });
      await reload();
    }));
    return h('tr', {}, h('td', { text: name }), h('td', { text: target }), h('td', {}, rm));
  }), 'Aliases'));
  const name = h('input', { required: true, placeholder: 'fast' });
  const target = h('input', { required: true, placeholder: 'openai/gpt-4o-mini' });
  const refused = h('p', { class: 'error', role: 'alert' });
  const form = h('form', { class: 'row' }, field('Alias', name), field('Model', target),
    h('div', { class: 'field' }, h('button', { type: 'submit', text: 'Add alias' })), refused);
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    refused.textContent = '';
    busy(form.querySelector('button'), async () => {
      await put('/api/models/aliases', { aliases: { ...await storedAliases(), [name.value.trim()]: target.value.trim() } }).catch(refuse(refused));
      form.reset();
      await reload();
      toast('Alias saved.');
    });
  });
  return { el: h('section', { class: 'card', 'aria-labelledby': 'alias-h' }, h('h2', { id: 'alias-h', text: 'Aliases' }), body, form), show };
}

function comboSection(reload) {
  const body = h('div');
  const show = (combos) => redraw(body, table(['Combo', 'Models (tried in order)', 'Actions'], combos.map((c) => {
    const rm = h('button', { type: 'button', class: 'danger', text: 'Remove', 'aria-label': `Remove combo ${c.name}` });
    rm.addEventListener('click', () => busy(rm, async () => {
      await put('/api/models/combos', { combos: (await storedCombos()).filter((x) => x.name !== c.name) });
      await reload();
    }));
    return h('tr', {}, h('td', { text: c.name }), h('td', { text: (c.models || []).join(' → ') }), h('td', {}, rm));
  }), 'Combos'));
  const name = h('input', { required: true, placeholder: 'best' });
  const list = h('input', { required: true, placeholder: 'claude/sonnet, openai/gpt-4o' });
  const refused = h('p', { class: 'error', role: 'alert' });
  const form = h('form', { class: 'row' }, field('Combo name', name), field('Models, in order', list),
    h('div', { class: 'field' }, h('button', { type: 'submit', text: 'Add combo' })), refused);
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    refused.textContent = '';
    busy(form.querySelector('button'), async () => {
      const models = list.value.split(',').map((x) => x.trim()).filter(Boolean);
      await put('/api/models/combos', { combos: [...await storedCombos(), { name: name.value.trim(), models }] }).catch(refuse(refused));
      form.reset();
      await reload();
      toast('Combo saved.');
    });
  });
  return { el: h('section', { class: 'card', 'aria-labelledby': 'combo-h' }, h('h2', { id: 'combo-h', text: 'Combos' }), body, form), show };
}
