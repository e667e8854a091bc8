// Billing: plans and prices (GraphQL, public), every user's subscriptions
// and the Stripe webhook events that kept failing (the admin routes
// /api/billing/*), with a retry for each of those.
import { get, post, qs, reach } from './api.js';
import { h, table, badge, toast, busy, fmtTime, focusButton } from './ui.js';

const PAGE = 20;
const enc = encodeURIComponent;
const query = '{ prices { type plan currency amount yearlyAmount } }';
const notConfigured = 'Billing is not configured on this gateway. Set STRIPE_SECRET_KEY (and STRIPE_WEBHOOK_SECRET) for the billing role to see plans, subscriptions and webhook events here.';

export async function render(root) {
  // The admin routes say first whether billing is configured at all.
  let subs;
  try {
    subs = await get(`/api/billing/subscriptions${qs({ take: PAGE })}`);
  } catch (e) {
    if (e.code === 'billing_not_configured') {
      root.append(h('p', { class: 'card', role: 'status', text: notConfigured }));
      return;
    }
    throw e;
  }
  const prices = h('section', { 'aria-labelledby': 'prices-h' }, h('h2', { id: 'prices-h', text: 'Plans and prices' }));
  const subsBox = h('section', { 'aria-labelledby': 'subs-h' });
  const deadBox = h('section', { 'aria-labelledby': 'dead-h' });
  root.append(prices, subsBox, deadBox);
  await Promise.all([renderPrices(prices), renderSubscriptions(subsBox, subs, 0), renderDead(deadBox, 0)]);
}

async function renderPrices(box) {
  const resp = await reach('/graphql', { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ query }) });
  const data = await resp.json().catch(() => ({}));
  const err = data.errors?.[0];
  if (!resp.ok && !err) {
    box.append(h('p', { class: 'error', role: 'alert', text: `Prices could not be read (HTTP ${resp.status}).` }));
    return;
  }
  if (err) {
    box.append(h('p', { class: 'error', role: 'alert', text: err.message }));
    return;
  }
  const money = (minor, cur) => (minor == null ? '—' : `${(minor / 100).toFixed(2)} ${String(cur || '').toUpperCase()}`);
  const rows = (data.data?.prices || []).map((p) => h('tr', {},
    h('td', { text: p.plan }), h('td', { class: 'num', text: money(p.amount, p.currency) }), h('td', { class: 'num', text: money(p.yearlyAmount, p.currency) })));
  box.append(table(['Plan', ['Monthly', 'num'], ['Yearly', 'num']], rows, 'Plans and prices'));
}

const statusKind = { active: 'ok', trialing: 'ok', past_due: 'warn', incomplete: 'warn', paused: 'warn', unpaid: 'bad', canceled: '', incomplete_expired: '' };
const words = (s) => String(s || '').replaceAll('_', ' ');

// pages is a server-paged pager: Previous and Next fetch another page. The
// page is drawn anew: the focus goes back to the button pressed, or, on
// the first or last page where it is disabled, to the other one.
function pages(skip, total, go, label) {
  const last = Math.max(0, Math.ceil(total / PAGE) - 1);
  const at = Math.floor(skip / PAGE);
  const names = [`Previous page of ${label}`, `Next page of ${label}`];
  const turn = (to, i) => async () => {
    await go(to);
    const [same, other] = i ? names.slice().reverse() : names;
    const b = document.querySelector(`button[aria-label="${same}"]`);
    focusButton(b && !b.disabled ? same : other);
  };
  const prev = h('button', { type: 'button', text: 'Previous page', 'aria-label': names[0], disabled: at === 0, onclick: turn(skip - PAGE, 0) });
  const next = h('button', { type: 'button', text: 'Next page', 'aria-label': names[1], disabled: at >= last, onclick: turn(skip + PAGE, 1) });
  return h('div', { class: 'pager' }, prev, h('span', { class: 'muted', 'aria-live': 'polite', text: `Page ${at + 1} of ${last + 1} (${total} ${label})` }), next);
}

async function renderSubscriptions(box, data, skip) {
  const go = async (to) => {
    const fresh = await get(`/api/billing/subscriptions${qs({ take: PAGE, skip: to })}`).catch((e) => { toast(e.message); return null; });
    if (fresh) await renderSubscriptions(box, fresh, to);
  };
  const list = data.subscriptions || [];
  const rows = list.map((s) => h('tr', {},
    h('td', { class: 'secret', text: s.userId }),
    h('td', { class: 'secret', text: s.id }),
    h('td', { text: words(s.plan) }),
    // The cycle billed now, and the one chosen when a change waits for the period's end.
    h('td', { text: s.billedRecurring && s.billedRecurring !== s.recurring ? `${words(s.billedRecurring)}, then ${words(s.recurring)}` : words(s.recurring) }),
    h('td', {}, badge(words(s.status), statusKind[s.status] || '')),
    h('td', { text: fmtTime(s.periodEnd) }),
    h('td', { text: s.cancelAtPeriodEnd ? 'Yes' : 'No' })));
  box.replaceChildren(h('h2', { id: 'subs-h', text: `Subscriptions (${data.total || 0})` }),
    table(['User', 'Subscription', 'Plan', 'Cycle', 'Status', 'Period ends', 'Cancels at period end'], rows, 'Subscriptions of all users'),
    pages(skip, data.total || 0, go, 'subscriptions'));
}

async function renderDead(box, skip) {
  let data;
  try {
    data = await get(`/api/billing/dead-letters${qs({ take: PAGE, skip })}`);
  } catch (e) {
    box.replaceChildren(h('h2', { id: 'dead-h', text: 'Dead-lettered webhook events' }), h('p', { class: 'error', role: 'alert', text: e.message }));
    return;
  }
  const list = data.deadLetters || [];
  const rows = list.map((d) => {
    const retry = h('button', { type: 'button', text: 'Retry', 'aria-label': `Retry event ${d.eventId || d.id}` });
    retry.addEventListener('click', () => busy(retry, async () => {
      await post(`/api/billing/dead-letters/${enc(d.id)}/retry`);
      toast(`Event ${d.eventId || d.id} handed to the consumer again.`);
      await renderDead(box, skip);
    }, 'Retrying…'));
    return h('tr', {},
      h('td', { class: 'secret', text: d.eventId || d.id }),
      h('td', { text: d.type || 'unknown' }),
      h('td', { text: fmtTime(d.failedAt) }),
      h('td', { class: 'num', text: String(d.attempts ?? '') }),
      h('td', { class: 'error', text: d.lastError || '' }),
      h('td', {}, retry));
  });
  box.replaceChildren(h('h2', { id: 'dead-h', text: `Dead-lettered webhook events (${data.total || 0})` }),
    h('p', { class: 'muted', text: 'Stripe events that kept failing. A retry hands the event to the consumer again; if it fails again it comes back here.' }),
    table(['Event', 'Type', 'Failed', ['Attempts', 'num'], 'Last error', 'Actions'], rows, 'Dead-lettered webhook events'),
    pages(skip, data.total || 0, (to) => renderDead(box, to), 'events'));
}
