// The shared part of the scripts the Go end-to-end tests run with node
// (node/nodetest/npm.go): a client of the official openai package
// configured from the environment, and a runner that executes a list of
// operations and prints one JSON result per operation.
//
// Environment:
//   SWITCHBOARD_BASE_URL    the gateway's API base, e.g. http://127.0.0.1:1234/v1 (required)
//   SWITCHBOARD_API_KEY     the key to send; empty or unset sends no credential at all
//   SWITCHBOARD_TIMEOUT_MS  per-request timeout (default 30000)
//   SWITCHBOARD_OPS         the operations as a JSON array, when not given as argv[2]
//
// Output (stdout): a JSON array with, for each operation in order, either
//   {"result": <what the SDK returned, as JSON>}
// or
//   {"error": {"class", "status", "code", "type", "param", "message", "requestID", "headers"}}
// An operation failing does not stop the ones after it. The process exits 0
// unless the harness itself failed (bad arguments), with a message on stderr.
import OpenAI from 'openai';

export { OpenAI };

// newClient returns an SDK client for the gateway. The SDK's retries are off
// so that a scripted upstream fault is seen once, as it is.
export function newClient(options = {}) {
  const baseURL = process.env.SWITCHBOARD_BASE_URL;
  if (!baseURL) {
    throw new Error('SWITCHBOARD_BASE_URL is not set');
  }
  const apiKey = process.env.SWITCHBOARD_API_KEY ?? '';
  const opts = {
    baseURL,
    // The SDK refuses to start without a key; to send none, give it a
    // placeholder and remove the header it makes.
    apiKey: apiKey || 'no-key',
    maxRetries: 0,
    timeout: Number(process.env.SWITCHBOARD_TIMEOUT_MS || 30000),
    ...options,
  };
  if (!apiKey) {
    opts.defaultHeaders = { ...opts.defaultHeaders, Authorization: null };
  }
  return new OpenAI(opts);
}

// describeError turns what the SDK threw into plain JSON: its class name
// (AuthenticationError, RateLimitError, APIConnectionError, ...), the HTTP
// status and the fields of the OpenAI error body.
export function describeError(err) {
  const out = { class: err?.constructor?.name ?? typeof err, message: String(err?.message ?? err) };
  if (err instanceof OpenAI.APIError) {
    out.status = err.status ?? null;
    out.code = err.code ?? null;
    out.type = err.type ?? null;
    out.param = err.param ?? null;
    out.requestID = err.requestID ?? null;
    if (err.headers) {
      out.headers = Object.fromEntries(err.headers.entries());
    }
  }
  return out;
}

// readOps returns the operations: argv[2] or SWITCHBOARD_OPS, a JSON array.
export function readOps() {
  const raw = process.argv[2] ?? process.env.SWITCHBOARD_OPS;
  if (!raw) {
    throw new Error('no operations: pass a JSON array as the first argument or in SWITCHBOARD_OPS');
  }
  const ops = JSON.parse(raw);
  if (!Array.isArray(ops)) {
    throw new Error('the operations must be a JSON array');
  }
  return ops;
}

// run executes each operation with handler(client, op) in order and prints
// the results. handler returns a JSON-serializable value or throws.
export async function run(handler, clientOptions) {
  let ops, client;
  try {
    ops = readOps();
    client = newClient(clientOptions);
  } catch (err) {
    process.stderr.write(`harness: ${err?.stack ?? err}\n`);
    process.exit(2);
  }
  const results = [];
  for (const op of ops) {
    try {
      results.push({ result: await handler(client, op) });
    } catch (err) {
      results.push({ error: describeError(err) });
    }
  }
  process.stdout.write(JSON.stringify(results) + '\n');
}
