// Drives the official @anthropic-ai/sdk against the gateway's /v1/messages,
// one operation per request (node/nodetest/npm.go). Each operation is
// {"op": "create" | "stream" | "countTokens", "params": {...}}:
//   create       client.messages.create(params), the message as returned
//   stream       client.messages.stream(params), read to its end with the
//                SDK's accumulator: {"events": [names], "raw": [events as
//                the SDK parsed them], "message": finalMessage()}
//   countTokens  client.messages.countTokens(params)
// Errors are described as harness.mjs does, with the Anthropic error type
// and the response's headers (lower-case names).
import Anthropic from '@anthropic-ai/sdk';
import { readOps } from './harness.mjs';

function describe(err) {
  const out = { class: err?.constructor?.name ?? typeof err, message: String(err?.message ?? err) };
  if (err instanceof Anthropic.APIError) {
    out.status = err.status ?? null;
    out.type = err.error?.error?.type ?? err.error?.type ?? null;
    out.requestID = err.requestID ?? null;
    if (err.headers) {
      out.headers = Object.fromEntries(err.headers.entries());
    }
  }
  return out;
}

let ops, client;
try {
  ops = readOps();
  const base = (process.env.SWITCHBOARD_BASE_URL ?? '').replace(/\/v1\/?$/, '');
  if (!base) throw new Error('SWITCHBOARD_BASE_URL is not set');
  client = new Anthropic({
    baseURL: base,
    apiKey: process.env.SWITCHBOARD_API_KEY || 'no-key',
    maxRetries: 0,
    timeout: Number(process.env.SWITCHBOARD_TIMEOUT_MS || 30000),
  });
} catch (err) {
  process.stderr.write(`harness: ${err?.stack ?? err}\n`);
  process.exit(2);
}
const results = [];
for (const { op, params } of ops) {
  try {
    switch (op) {
      case 'create':
        results.push({ result: await client.messages.create(params) });
        break;
      case 'stream': {
        const events = [];
        const raw = [];
        const stream = client.messages.stream(params);
        stream.on('streamEvent', (ev) => {
          events.push(ev.type);
          raw.push(structuredClone(ev));
        });
        const message = await stream.finalMessage();
        results.push({ result: { events, raw, message } });
        break;
      }
      case 'countTokens':
        results.push({ result: await client.messages.countTokens(params) });
        break;
      default:
        throw new Error(`unknown op ${op}`);
    }
  } catch (err) {
    results.push({ error: describe(err) });
  }
}
process.stdout.write(JSON.stringify(results) + '\n');
