import { get, post, del } from './api.js';
import { latestOnly, h, field, table, toast, busy, fmtTime, refuse } from './ui.js';

export async function render(root) {
  const { keys = [] } = await get('/api/keys');
  const shown = h('div', { 'aria-live': 'polite' });
  const name = h('input', { required: true, placeholder: 'laptop' });
  const refused = h('p', { class: 'error', role: 'alert' });
  const form = h('form', { class: 'card', 'aria-labelledby': 'issue-h' },
    h('h2', { id: 'issue-h', text: 'Issue a key' }),
    h('div', { class: 'row' }, field('Key name', name), h('div', { class: 'field' }, h('button', { type: 'submit', class: 'primary', text: 'Issue key' }))),
    refused,
    shown);
  // A reload redraws the list only: a key just issued stays shown, to be
  // copied, whatever else is done meanwhile.
  const begin = latestOnly();
  const reload = async () => {
    const latest = begin();
    const list = await get('/api/keys');
    if (!latest()) return;
    const fresh = h('div');
    renderList(fresh, list.keys || [], reload);
    root.querySelector('#keys-list').replaceWith(fresh.firstChild);
  };
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    refused.textContent = '';
    busy(form.querySelector('[type=submit]'), async () => {
      const r = await post('/api/keys', { name: name.value.trim() }).catch(refuse(refused));
      const keyBox = h('input', { readonly: true, value: r.key, class: 'secret', 'aria-label': 'New API key' });
      const copy = h('button', { type: 'button', text: 'Copy' });
      copy.addEventListener('click', async () => {
        try {
          await navigator.clipboard.writeText(r.key);
        } catch {
          keyBox.select();
          document.execCommand('copy');
        }
        toast('Key copied.');
      });
      await reload();
      shown.replaceChildren(h('div', { class: 'card', role: 'alert' },
        h('p', {}, h('strong', { text: `The key ${r.name} is shown this once.` }), ' Copy it now: it cannot be shown again.'),
        h('div', { class: 'row' }, keyBox, copy)));
      name.value = '';
      keyBox.focus();
      keyBox.select();
    }, 'Issuing…');
  });
  root.replaceChildren(form);
  renderList(root, keys, reload);
}

function renderList(root, keys, reload) {
  const rows = keys.map((k) => {
    const revoke = h('button', { type: 'button', class: 'danger', text: 'Revoke', 'aria-label': `Revoke ${k.name}` });
    revoke.addEventListener('click', () => {
      if (!confirm(`Revoke the key ${k.name}? Clients using it stop working.`)) return;
      busy(revoke, async () => {
        // A key revoked elsewhere (another tab, the admin API) answers 404:
        // it is gone all the same.
        const done = await del(`/api/keys/${encodeURIComponent(k.id)}`).then(() => true, (e) => {
          if (e.status !== 404) throw e;
          return false;
        });
        await reload();
        toast(done ? `${k.name} revoked.` : `${k.name} was revoked already.`);
      });
    });
    return h('tr', {}, h('td', { text: k.name }), h('td', { class: 'secret', text: k.id }), h('td', { text: fmtTime(k.createdAt) }), h('td', {}, revoke));
  });
  root.append(h('section', { id: 'keys-list', 'aria-labelledby': 'keys-h' }, h('h2', { id: 'keys-h', text: `Keys (${keys.length})` }),
    table(['Name', 'Id', 'Created', 'Actions'], rows, 'API keys')));
}
