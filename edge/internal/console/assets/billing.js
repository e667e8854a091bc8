import { h, table } from './ui.js';

const query = '{ prices { type plan currency amount yearlyAmount } }';

export async function render(root) {
  const resp = await fetch('/graphql', { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ query }) });
  if (resp.status === 404 || resp.status === 405) {
    root.append(h('p', { class: 'card', text: 'Billing is not configured on this gateway.' }));
    return;
  }
  const data = await resp.json().catch(() => ({}));
  const err = data.errors?.[0];
  if (err && (err.extensions?.code === 'BILLING_NOT_CONFIGURED' || /not configured/i.test(err.message || ''))) {
    root.append(h('p', { class: 'card', text: 'Billing is not configured on this gateway (no Stripe key).' }));
    return;
  }
  if (err) {
    root.append(h('p', { class: 'error', role: 'alert', text: err.message }));
    return;
  }
  const money = (minor, cur) => (minor == null ? '—' : `${(minor / 100).toFixed(2)} ${String(cur || '').toUpperCase()}`);
  const rows = (data.data?.prices || []).map((p) => h('tr', {},
    h('td', { text: p.plan }), h('td', { class: 'num', text: money(p.amount, p.currency) }), h('td', { class: 'num', text: money(p.yearlyAmount, p.currency) })));
  root.append(
    h('section', { 'aria-labelledby': 'prices-h' }, h('h2', { id: 'prices-h', text: 'Plans and prices' }),
      table(['Plan', ['Monthly', 'num'], ['Yearly', 'num']], rows, 'Plans and prices')),
    h('p', { class: 'muted card', text: 'Subscriptions across users and dead-lettered webhook events have no admin API yet; they are not shown.' }));
}
