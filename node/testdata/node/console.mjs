// The console's browser driver for node/console_test.go: Debian's chromium,
// headless, driven by playwright-core. It reads one JSON command per line on
// stdin and answers one JSON line on stdout: {ok, value} or {ok: false,
// error}. Locators are by accessible role and name, or by label, as a user
// (or a screen reader) finds things.
import { chromium } from 'playwright-core';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import readline from 'node:readline';

const userDataDir = mkdtempSync(join(tmpdir(), 'sb-console-'));
const context = await chromium.launchPersistentContext(userDataDir, {
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  headless: true,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  viewport: { width: 1366, height: 768 }, // a laptop screen
});
const page = context.pages()[0] || await context.newPage();
page.setDefaultTimeout(Number(process.env.STEP_TIMEOUT_MS || 20000));
const problems = [];
page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
// Failed fetches (a refused token, a 404 probe) are expected; script errors
// and CSP violations are not.
page.on('console', (m) => {
  if (m.type() === 'error' && !m.text().startsWith('Failed to load resource')) problems.push(`console: ${m.text()}`);
});

function scope(cmd) {
  return cmd.within ? page.locator(cmd.within) : page;
}

function locate(cmd) {
  const s = scope(cmd);
  if (cmd.label) return s.getByLabel(cmd.label, { exact: cmd.exact ?? true }).first();
  if (cmd.role) return s.getByRole(cmd.role, { name: cmd.name, exact: cmd.exact ?? true }).first();
  if (cmd.text) return s.getByText(cmd.text, { exact: cmd.exact ?? false }).first();
  return s.locator(cmd.selector).first();
}

// Requests held back by the hold op until release lets them go.
let held = [];

async function release() {
  for (let i = 0; i < 200 && !held.length; i++) await page.waitForTimeout(50);
  const batch = held;
  held = [];
  for (const r of batch) r.go();
  for (const r of batch) await (await r.response)?.finished();
  await page.unrouteAll();
  // The page acts on the responses in its own event loop: give it a moment.
  await page.evaluate(() => new Promise((r) => setTimeout(r, 300)));
  return batch.length;
}

const ops = {
  // hold keeps requests to url (a glob) from reaching the gateway until
  // release, to play a slow network: all of them, or the first c.count
  // (of method c.method, when given).
  hold: async (c) => {
    let seen = 0;
    await page.route(c.url, (route) => {
      if (c.method && route.request().method() !== c.method) return route.continue();
      if (c.count && seen++ >= c.count) return route.continue();
      let go;
      const started = new Promise((r) => { go = r; });
      const response = started.then(() => route.continue()).then(() => route.request().response());
      held.push({ go, response });
    });
    return true;
  },
  release,
  goto: async (c) => { await page.goto(c.url); return page.url(); },
  reload: async () => { await page.reload(); return page.url(); },
  acceptDialogs: async () => { page.on('dialog', (d) => d.accept()); return true; },
  click: async (c) => { await locate(c).click(); return true; },
  fill: async (c) => { await locate(c).fill(c.value); return true; },
  select: async (c) => { await locate(c).selectOption(c.value); return true; },
  check: async (c) => { await locate(c).setChecked(c.checked ?? true); return true; },
  press: async (c) => { await page.keyboard.press(c.key); return true; },
  focus: async (c) => { await locate(c).focus(); return true; },
  viewport: async (c) => { await page.setViewportSize({ width: c.width, height: c.height }); return true; },
  // eval answers the value of an expression evaluated in the page.
  eval: async (c) => page.evaluate(c.expr),
  wait: async (c) => { await locate(c).waitFor({ state: c.state || 'visible', timeout: c.timeout }); return true; },
  text: async (c) => (await locate({ selector: 'main', ...c }).innerText()),
  value: async (c) => locate(c).inputValue(),
  attr: async (c) => locate(c).getAttribute(c.attr),
  // aria answers what assistive technology is given of an element: its
  // accessibility tree, as YAML (roles, names, text).
  aria: async (c) => locate(c).ariaSnapshot(),
  count: async (c) => scope(c).locator(c.selector).count(),
  focused: async () => page.evaluate(() => {
    const e = document.activeElement;
    return e ? `${e.tagName.toLowerCase()}:${e.getAttribute('aria-label') || e.textContent.trim().slice(0, 40)}` : '';
  }),
  hash: async () => page.evaluate(() => location.hash),
  session: async () => page.evaluate(() => JSON.stringify(sessionStorage)),
  title: async () => page.title(),
  screenshot: async (c) => { await page.screenshot({ path: c.path, fullPage: true }); return c.path; },
  problems: async () => problems.splice(0),
  fetchHeaders: async (c) => {
    const r = await page.request.get(c.url);
    return r.headers();
  },
};

const rl = readline.createInterface({ input: process.stdin });
for await (const line of rl) {
  if (!line.trim()) continue;
  let cmd;
  let out;
  try {
    cmd = JSON.parse(line);
    if (cmd.op === 'close') break;
    const fn = ops[cmd.op];
    if (!fn) throw new Error(`unknown op ${cmd.op}`);
    out = { ok: true, value: await fn(cmd) };
  } catch (e) {
    out = { ok: false, error: String(e?.message || e).split('\n').slice(0, 6).join('\n') };
  }
  process.stdout.write(`${JSON.stringify(out)}\n`);
}
await context.close();
rmSync(userDataDir, { recursive: true, force: true });
