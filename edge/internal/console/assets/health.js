import { get, post, del } from './api.js';
import { latestOnly, h, table, badge, toast, busy, ago, duration, refreshFailure } from './ui.js';

const enc = encodeURIComponent;

export async function render(root) {
  const body = h('div');
  const refreshed = h('p', { class: 'muted', 'aria-live': 'off' });
  root.append(h('p', { class: 'muted', text: 'Each connection\u2019s state; cooldowns count down and the page refreshes every 5 seconds.' }), refreshed, body);
  let until = [];
  let shownAt = '';
  // The 5-second refresh and an action's may overlap: the later shows.
  const begin = latestOnly();
  const load = async () => {
    const latest = begin();
    const [{ connections = [] }, { cooldowns = [] }] = await Promise.all([get('/api/providers'), get('/api/cooldowns')]);
    if (!latest()) return;
    const now = Date.now();
    until = [];
    const byConn = {};
    for (const c of cooldowns) (byConn[c.connectionId] ||= []).push(c);
    const rows = connections.map((c) => {
      const cds = byConn[c.id] || [];
      let state;
      if (c.needsRelogin) state = badge('needs re-login', 'bad');
      else if (!c.isActive) state = badge('disabled');
      else if (cds.length) state = badge('cooling', 'warn');
      else state = badge('active', 'ok');
      const cooling = cds.map((cd) => {
        const left = h('span', { class: 'left', text: duration(cd.secondsLeft) });
        until.push([left, now + cd.secondsLeft * 1000]);
        // The message usually starts with the reason; say each thing once.
        const msg = cd.message && cd.reason && cd.message.startsWith(`${cd.reason}:`) ? cd.message.slice(cd.reason.length + 1).trim() : cd.message;
        const cause = [cd.reason, cd.status && !(msg || '').includes(String(cd.status)) ? `HTTP ${cd.status}` : '', msg].filter(Boolean).join(', ');
        return h('div', {}, h('strong', { text: cd.model || 'all models' }), ': ', left, ' left', cause ? ` (${cause})` : '');
      });
      const t = c.lastTest;
      const test = h('button', { type: 'button', text: 'Test', 'aria-label': `Test ${c.name}` });
      test.addEventListener('click', () => busy(test, async () => {
        const r = await post(`/api/providers/${enc(c.id)}/test`);
        await load();
        toast(r.valid ? `${c.name}: OK (${r.latencyMs} ms)` : `${c.name}: failed: ${r.error || r.status}`);
      }, 'Testing…'));
      const clear = h('button', { type: 'button', text: 'Clear cooldowns', 'aria-label': `Clear cooldowns of ${c.name}`, disabled: !cds.length });
      clear.addEventListener('click', () => busy(clear, async () => {
        const r = await del(`/api/providers/${enc(c.id)}/cooldowns`);
        await load();
        toast(`${c.name}: ${r.cleared} cooldown${r.cleared === 1 ? '' : 's'} cleared.`);
      }, 'Clearing…'));
      return h('tr', { 'data-connection': c.name },
        h('td', {}, h('strong', { text: c.name }), h('div', { class: 'muted', text: c.provider })),
        h('td', {}, state, refreshFailure(c)),
        h('td', {}, cooling.length ? cooling : h('span', { class: 'muted', text: '—' })),
        h('td', {}, t?.testedAt ? h('span', {}, badge(t.ok ? 'OK' : 'failed', t.ok ? 'ok' : 'bad'), ` ${ago(t.testedAt)}`,
          t.latencyMs ? `, ${t.latencyMs} ms` : '', t.error ? h('div', { class: 'muted', text: t.error }) : null) : h('span', { class: 'muted', text: 'never' })),
        h('td', {}, h('div', { class: 'actions' }, test, clear)));
    });
    body.replaceChildren(table(['Connection', 'State', 'Cooling', 'Last test', 'Actions'], rows, 'Connection health'));
    shownAt = new Date().toLocaleTimeString();
    refreshed.className = 'muted';
    refreshed.removeAttribute('role');
    refreshed.textContent = `Updated ${shownAt}.`;
  };
  await load();
  const tick = setInterval(() => {
    for (const [el, end] of until) el.textContent = duration((end - Date.now()) / 1000);
  }, 1000);
  // A refresh that fails says so (once, as an alert) and keeps saying it
  // until one succeeds: the states shown are then older than they look.
  const failed = (e) => {
    const text = `Could not refresh: ${e.message} The states below are as of ${shownAt}.`;
    if (refreshed.textContent === text) return;
    refreshed.className = 'error';
    refreshed.setAttribute('role', 'alert');
    refreshed.textContent = text;
  };
  const poll = setInterval(() => { if (!document.hidden) load().catch(failed); }, 5000);
  return () => { clearInterval(tick); clearInterval(poll); };
}
