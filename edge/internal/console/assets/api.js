// The admin API client: every call carries the admin token the sign-in kept
// in sessionStorage (this tab only).

const KEY = 'switchboard.adminToken';
const MACHINE = 'switchboard.machine';
const REFUSED = 'switchboard.refused';

export const session = {
  get token() { return sessionStorage.getItem(KEY) || ''; },
  set(token) { sessionStorage.setItem(KEY, token); },
  // machine is the machine (tenant) the pages act on; empty is the default.
  get machine() { return sessionStorage.getItem(MACHINE) || ''; },
  setMachine(id) { if (id) sessionStorage.setItem(MACHINE, id); else sessionStorage.removeItem(MACHINE); },
  clear() { sessionStorage.removeItem(KEY); sessionStorage.removeItem(MACHINE); },
  // refused tells, once, that the gateway refused the token the tab kept:
  // the sign-in page says why it is back.
  takeRefused() {
    const r = sessionStorage.getItem(REFUSED) === '1';
    sessionStorage.removeItem(REFUSED);
    return r;
  },
  markRefused() { sessionStorage.setItem(REFUSED, '1'); },
};

export class APIError extends Error {
  constructor(status, body) {
    super(body?.error?.message || `HTTP ${status}`);
    this.status = status;
    this.code = body?.error?.code;
  }
}

// unreachable is what a call says when the gateway did not answer at all
// (stopped, or the network between is down), where the browser's own
// words are "Failed to fetch".
export const unreachable = 'The gateway did not answer: it may be stopped or out of reach. Try again once it is back.';

// reach is fetch, its network failure told in words.
export async function reach(path, init) {
  try {
    return await fetch(path, init);
  } catch (e) {
    if (e instanceof TypeError) throw new APIError(0, { error: { message: unreachable } });
    throw e;
  }
}

export async function api(method, path, body, { auth = true } = {}) {
  const headers = {};
  if (auth && session.token) headers.Authorization = `Bearer ${session.token}`;
  if (auth && session.machine) headers['X-Switchboard-Machine'] = session.machine;
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const resp = await reach(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  let data = null;
  const text = await resp.text().catch(() => { throw new APIError(0, { error: { message: unreachable } }); });
  try { data = text ? JSON.parse(text) : null; } catch { data = null; }
  if (!resp.ok) {
    if (resp.status === 401 && auth && path.startsWith('/api/')) {
      session.clear();
      session.markRefused();
      location.hash = '#/signin';
    }
    throw new APIError(resp.status, data);
  }
  return data;
}

export const get = (p) => api('GET', p);
export const post = (p, b = {}) => api('POST', p, b);
export const patch = (p, b) => api('PATCH', p, b);
export const put = (p, b) => api('PUT', p, b);
export const del = (p) => api('DELETE', p);

export function qs(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== '') q.set(k, v);
  const s = q.toString();
  return s ? `?${s}` : '';
}
