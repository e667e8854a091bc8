import { get, patch } from './api.js';
import { h, field, check, select, toast, busy } from './ui.js';

const levels = ['lite', 'full', 'ultra', 'wenyan-lite', 'wenyan', 'wenyan-ultra'];

export async function render(root) {
  const s = await get('/api/settings');
  const requireKey = h('input', { type: 'checkbox', checked: !!s.requireApiKey });
  const caveman = h('input', { type: 'checkbox', checked: !!s.cavemanEnabled });
  const level = select(levels, s.cavemanLevel || 'full');
  const strategy = select([['fill-first', 'fill-first (lowest priority number first)'], ['round-robin', 'round-robin (sticky)']], s.routingStrategy || 'fill-first');
  const sticky = h('input', { type: 'number', min: 0, value: s.stickyLimit || 0 });
  const form = h('form', { class: 'card', 'aria-labelledby': 'settings-h' },
    h('h2', { id: 'settings-h', text: 'This machine' }),
    h('div', { class: 'field' }, check('Require an API key on every request', requireKey)),
    h('div', { class: 'field' }, check('Terse answers (caveman)', caveman)),
    h('div', { class: 'row' }, field('Caveman level', level), field('Routing strategy', strategy), field('Sticky limit', sticky, 'Requests per connection before round-robin moves on.')),
    h('button', { type: 'submit', class: 'primary', text: 'Save settings' }));
  // shown is what the page shows, as the last save left it: only the
  // settings changed since are sent, so one changed meanwhile elsewhere
  // (another tab, the admin API) stays.
  const values = () => ({
    requireApiKey: requireKey.checked, cavemanEnabled: caveman.checked, cavemanLevel: level.value,
    routingStrategy: strategy.value, stickyLimit: Number(sticky.value) || 0,
  });
  let shown = values();
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const now = values();
    const changed = Object.fromEntries(Object.entries(now).filter(([k, v]) => v !== shown[k]));
    busy(form.querySelector('[type=submit]'), async () => {
      await patch('/api/settings', changed);
      shown = now;
      toast('Settings saved.');
    }, 'Saving…');
  });
  root.append(form);
}
