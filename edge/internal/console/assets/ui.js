// Small DOM helpers. Text is always set with textContent: values from the
// API never become markup.

export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.className = v;
    else if (k === 'text') el.textContent = v;
    else if (k in el && typeof v !== 'string') el[k] = v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

let fieldSeq = 0;

// field is a labelled input (or select/textarea given as control).
export function field(label, control, hint) {
  const id = control.id || `f${++fieldSeq}`;
  control.id = id;
  const kids = [h('label', { for: id, text: label }), control];
  if (hint) {
    const hid = `${id}-hint`;
    control.setAttribute('aria-describedby', hid);
    kids.push(h('div', { id: hid, class: 'muted', text: hint }));
  }
  return h('div', { class: 'field' }, kids);
}

export function check(label, input) {
  return h('label', { class: 'check' }, input, label);
}

export function select(options, value) {
  const s = h('select');
  for (const o of options) {
    const [v, t] = Array.isArray(o) ? o : [o, o];
    s.append(h('option', { value: v, text: t }));
  }
  if (value !== undefined) s.value = value;
  return s;
}

export function table(headers, rows, caption) {
  const t = h('table');
  if (caption) t.append(h('caption', { class: 'sr', text: caption }));
  t.append(h('thead', {}, h('tr', {}, headers.map((x) => {
    const [text, cls] = Array.isArray(x) ? x : [x];
    return h('th', { scope: 'col', class: cls, text });
  }))));
  const body = h('tbody');
  for (const r of rows) body.append(r);
  if (!rows.length) body.append(h('tr', {}, h('td', { colspan: headers.length, class: 'muted', text: 'Nothing yet.' })));
  t.append(body);
  return h('div', { class: 'table-wrap' }, t);
}

export function badge(text, kind = '') {
  return h('span', { class: `badge ${kind}`, text });
}

// toast tells what an action did; actions tell it once the page shows it
// (after their reload), so what is announced is on screen.
let toastTimer;
export function toast(msg) {
  const s = document.getElementById('status');
  s.textContent = msg;
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => { s.textContent = ''; }, 6000);
}

// busy disables a button while fn runs and reports its error (unless fn
// showed it already: e.shown). Disabling
// the focused button drops the focus to the page's body: it comes back
// afterwards (see refocus).
export async function busy(btn, fn, label) {
  const old = btn.textContent;
  const name = btn.getAttribute('aria-label') || old;
  const focused = document.activeElement === btn;
  btn.disabled = true;
  btn.setAttribute('aria-busy', 'true');
  if (label) btn.textContent = label;
  try {
    return await fn();
  } catch (e) {
    if (!e.shown) toast(e.message);
    return undefined;
  } finally {
    btn.disabled = false;
    btn.removeAttribute('aria-busy');
    btn.textContent = old;
    if (focused) refocus(btn, name);
  }
}

// latestOnly numbers a page's reloads: begin() starts one and answers
// whether it is still the latest begun. Actions finishing close together
// reload at once, and the answer read first may come last: a reload
// overtaken shows nothing, the later one shows the newer state.
export function latestOnly() {
  let begun = 0;
  return () => {
    const n = ++begun;
    return () => n === begun;
  };
}

// refuse shows why the gateway refused a form in the form itself (el, an
// alert), beside the fields to correct, where a notice would go away; the
// form's action then stops there.
export function refuse(el) {
  return (e) => {
    el.textContent = e.message;
    e.shown = true;
    throw e;
  };
}

// refocus puts the focus back on a button that had it, unless it moved
// meanwhile: on the button itself, or, when a redraw replaced it, on the
// button of the same name, else on the page's content (its row went).
function refocus(btn, name) {
  if (document.activeElement && document.activeElement !== document.body) return;
  if (btn.isConnected) {
    btn.focus();
    return;
  }
  focusButton(name);
}

// focusButton focuses the page's button of that name, or else the page's
// content.
export function focusButton(name) {
  const main = document.getElementById('main');
  const same = [...main.querySelectorAll('button')].find((b) => (b.getAttribute('aria-label') || b.textContent) === name);
  (same || main).focus();
}

export function fmtTime(ts) {
  if (!ts) return '';
  const d = new Date(ts);
  return isNaN(d) ? '' : d.toLocaleString();
}

export function fmtNum(n) {
  return Number(n || 0).toLocaleString();
}

export function ago(ts) {
  if (!ts) return 'never';
  const s = Math.round((Date.now() - new Date(ts)) / 1000);
  if (s < 60) return `${s}s ago`;
  if (s < 3600) return `${Math.round(s / 60)}m ago`;
  if (s < 86400) return `${Math.round(s / 3600)}h ago`;
  return `${Math.round(s / 86400)}d ago`;
}

// refreshFailure says why an OAuth connection's latest token refresh
// failed, and when, or is null.
export function refreshFailure(c) {
  if (!c.refreshError) return null;
  const when = c.refreshErrorAt ? ` (${ago(c.refreshErrorAt)})` : '';
  return h('div', { class: 'muted', text: `Refresh error${when}: ${c.refreshError}` });
}

export function duration(sec) {
  sec = Math.max(0, Math.round(sec));
  if (sec < 60) return `${sec}s`;
  const m = Math.floor(sec / 60);
  return `${m}m ${sec % 60}s`;
}

// pager renders items page by page (fast with thousands of rows).
export function pager(items, size, render) {
  const wrap = h('div');
  let page = 0;
  const pages = () => Math.max(1, Math.ceil(items.length / size));
  const info = h('span', { class: 'muted', 'aria-live': 'polite' });
  const prev = h('button', { type: 'button', text: 'Previous page', onclick: () => { page--; draw(); } });
  const next = h('button', { type: 'button', text: 'Next page', onclick: () => { page++; draw(); } });
  const body = h('div');
  function draw() {
    page = Math.min(Math.max(page, 0), pages() - 1);
    body.replaceChildren(render(items.slice(page * size, (page + 1) * size)));
    info.textContent = `Page ${page + 1} of ${pages()} (${items.length} items)`;
    const had = document.activeElement;
    prev.disabled = page === 0;
    next.disabled = page >= pages() - 1;
    handFocus(had, prev, next);
  }
  wrap.append(body, h('div', { class: 'pager' }, prev, info, next));
  draw();
  return wrap;
}

// handFocus moves the focus from a pager's button that had it (had) and
// went disabled, the first or the last page reached, to the other one,
// where it would drop to the page's body.
export function handFocus(had, a, b) {
  if (had === a && a.disabled && !b.disabled) b.focus();
  else if (had === b && b.disabled && !a.disabled) a.focus();
}

// safeURL lets only http(s) addresses become links: a provider's answer
// (a verification or sign-in URL) never turns into a javascript: link.
export function safeURL(raw) {
  try {
    const u = new URL(raw);
    return u.protocol === 'http:' || u.protocol === 'https:' ? u.href : '';
  } catch {
    return '';
  }
}
