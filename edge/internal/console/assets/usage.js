import { get, qs } from './api.js';
import { h, field, select, table, badge, fmtNum, fmtTime, handFocus } from './ui.js';
import { stacked, bars } from './charts.js';

const periods = [['today', 'Today'], ['24h', 'Last 24 hours'], ['7d', 'Last 7 days'], ['30d', 'Last 30 days']];
const metrics = [['requests', 'Requests'], ['totalTokens', 'Tokens'], ['errors', 'Errors']];

export async function render(root, params) {
  const period = select(periods, params.get('period') || '24h');
  const by = select([['provider', 'Provider'], ['model', 'Model'], ['key', 'Key']], params.get('by') || 'provider');
  const controls = h('div', { class: 'row' }, field('Period', period), field('Split by', by));
  const summary = h('div');
  const log = h('section', { 'aria-labelledby': 'log-h' });
  root.append(controls, summary, log);
  const draw = async () => {
    summary.setAttribute('aria-busy', 'true');
    const [stats, series] = await Promise.all([
      get(`/api/usage/stats${qs({ period: period.value })}`),
      get(`/api/usage/series${qs({ period: period.value, by: by.value })}`)]);
    summary.replaceChildren(totals(stats.totals || {}), overTime(series), breakdowns(stats));
    summary.removeAttribute('aria-busy');
  };
  // The choices, and the request log's filters once applied, go into the
  // page's address (as the history's current entry): a reload, or the
  // link, shows them again.
  const kept = Object.fromEntries(params);
  const keep = (choices) => {
    Object.assign(kept, choices);
    history.replaceState(null, '', `#/usage${qs(kept)}`);
  };
  const choose = () => {
    keep({ period: period.value, by: by.value });
    return draw();
  };
  period.addEventListener('change', choose);
  by.addEventListener('change', choose);
  await draw();
  await requestLog(log, params, keep);
}

function totals(t) {
  const stat = (k, v) => h('div', { class: 'stat' }, h('div', { class: 'v', text: v }), h('div', { class: 'k', text: k }));
  return h('div', { class: 'cards' },
    stat('Requests', fmtNum(t.requests)), stat('Errors', fmtNum(t.errors)), stat('Tokens', fmtNum(t.totalTokens)),
    stat('Prompt tokens', fmtNum(t.promptTokens)), stat('Completion tokens', fmtNum(t.completionTokens)),
    stat('Average latency', `${Math.round(t.avgLatencyMs || 0)} ms`));
}

function overTime(series) {
  const daily = series.period === '7d' || series.period === '30d';
  const labels = (series.buckets || []).map((b) => {
    const d = new Date(b);
    return daily ? `${d.getMonth() + 1}/${d.getDate()}` : `${String(d.getHours()).padStart(2, '0')}:00`;
  });
  const list = series.series || [];
  const legend = h('div', { class: 'legend' }, list.map((x, i) => h('span', { class: `sw${Math.min(i, 8)}`, text: x.name || x.key || '(none)' })));
  const figs = metrics.map(([m, title]) => h('figure', {},
    h('figcaption', { text: `${title} over time by ${series.by}` }),
    stacked({ title: `${title} over time by ${series.by}`, labels, series: list.map((x) => ({ label: x.name || x.key || '(none)', values: x[m] || [] })) }),
    legend.cloneNode(true)));
  return h('section', { 'aria-labelledby': 'time-h' }, h('h2', { id: 'time-h', text: 'Over time' }), h('div', { class: 'charts' }, figs));
}

function breakdowns(stats) {
  const top = (rows, m) => (rows || []).slice().sort((a, b) => b[m] - a[m]).slice(0, 10).map((r) => ({ label: r.name || r.key || '(none)', value: r[m] || 0 }));
  const figs = [];
  for (const [dim, rows] of [['provider', stats.byProvider], ['model', stats.byModel], ['key', stats.byKey]]) {
    for (const [m, title] of metrics) {
      figs.push(h('figure', {}, h('figcaption', { text: `${title} by ${dim}` }), bars({ title: `${title} by ${dim}`, rows: top(rows, m) })));
    }
  }
  return h('section', { 'aria-labelledby': 'break-h' }, h('h2', { id: 'break-h', text: 'Breakdowns' }), h('div', { class: 'charts' }, figs));
}

// requestLog shows the log filtered as the address says (params), and
// keeps the filters applied there (keep).
async function requestLog(section, params, keep) {
  const [{ keys = [] }, { connections = [] }] = await Promise.all([get('/api/keys'), get('/api/providers')]);
  const key = select([['', 'Any key'], ...keys.map((k) => [k.id, k.name])], params.get('key') || '');
  const conn = select([['', 'Any connection'], ...connections.map((c) => [c.id, c.name])], params.get('connection') || '');
  const model = h('input', { placeholder: 'local/llama3', value: params.get('model') || '' });
  // The log keeps the model as the upstream names it (llama3) beside its
  // provider: a model as the models page lists it, <prefix or provider>/
  // <model>, is looked for as that provider's.
  const modelFilter = () => {
    const v = model.value.trim();
    const i = v.indexOf('/');
    const c = i > 0 && connections.find((x) => (x.providerSpecificData?.prefix || x.provider) === v.slice(0, i) || x.provider === v.slice(0, i));
    return c ? { model: v.slice(i + 1), provider: c.provider } : { model: v };
  };
  const status = select([['', 'Any status'], ['2xx', '2xx'], ['error', 'Errors (400+)'], ['4xx', '4xx'], ['429', '429'], ['5xx', '5xx']], params.get('status') || '');
  const since = h('input', { type: 'datetime-local', value: params.get('from') || '' });
  const until = h('input', { type: 'datetime-local', value: params.get('to') || '' });
  const form = h('form', { class: 'card', 'aria-label': 'Filter the request log' },
    h('div', { class: 'row' }, field('Key', key), field('Connection', conn), field('Model', model, 'As the models page lists it, or as the upstream names it.'), field('Status', status),
      field('From', since), field('To', until)),
    h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary', text: 'Apply filters' })));
  const out = h('div');
  const more = h('button', { type: 'button', text: 'Older requests' });
  const newest = h('button', { type: 'button', text: 'Newest' });
  const info = h('span', { class: 'muted', 'aria-live': 'polite' });
  const refused = h('p', { class: 'error', role: 'alert' });
  let cursor = '';
  // show loads a page of the log; when the gateway refuses (a range that
  // ends before it starts) or does not answer, it says why in place of the
  // rows, which answered another filter.
  const show = (from) => load(from).catch((e) => {
    refused.textContent = e.message;
    info.textContent = '';
    out.replaceChildren();
    more.disabled = true;
  });
  const load = async (from) => {
    const iso = (v) => (v ? new Date(v).toISOString() : '');
    const r = await get(`/api/usage/requests${qs({
      keyId: key.value, connectionId: conn.value, ...modelFilter(), status: status.value,
      since: iso(since.value), until: iso(until.value), cursor: from, limit: 50,
    })}`);
    refused.textContent = '';
    cursor = r.nextCursor || '';
    const had = document.activeElement;
    more.disabled = !cursor;
    newest.disabled = !from;
    handFocus(had, newest, more);
    info.textContent = `${r.requests.length} requests shown (${r.scanned} usage stream messages read).`;
    out.replaceChildren(table(['Time', 'Status', 'Model', 'Provider', 'Connection', 'Key', 'Endpoint', ['Tokens', 'num'], ['Latency', 'num'], 'Request'],
      r.requests.map((e) => h('tr', {},
        h('td', { text: fmtTime(e.time) }),
        h('td', {}, badge(String(e.status), e.status >= 500 ? 'bad' : e.status >= 400 ? 'warn' : 'ok'), e.errorCode ? h('div', { class: 'muted', text: e.errorCode }) : null),
        h('td', { text: e.model }), h('td', { text: e.provider }),
        h('td', { text: e.connectionName || e.connectionId }), h('td', { text: e.keyName || e.keyId || '—' }),
        h('td', { text: e.endpoint }),
        h('td', { class: 'num', text: fmtNum(e.totalTokens) }), h('td', { class: 'num', text: `${fmtNum(e.latencyMs)} ms` }),
        h('td', { class: 'muted secret', text: e.requestId }))), 'Request log'));
  };
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    keep({ key: key.value, connection: conn.value, model: model.value.trim(), status: status.value, from: since.value, to: until.value });
    show('');
  });
  more.addEventListener('click', () => show(cursor));
  newest.addEventListener('click', () => show(''));
  section.append(h('h2', { id: 'log-h', text: 'Request log' }), form, refused, out, h('div', { class: 'pager' }, newest, info, more));
  await show('');
}
