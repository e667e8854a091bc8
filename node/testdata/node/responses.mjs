// Calls client.responses once per operation (node/nodetest/npm.go); each
// operation is the request body as the SDK takes it. A streaming request is
// read with the SDK's own stream reader and summarised: the event types, the
// text from its deltas and the final response.
import { run } from './harness.mjs';

await run(async (client, params) => {
  if (!params.stream) {
    return client.responses.create(params);
  }
  const stream = await client.responses.create(params);
  const out = { types: [], text: '', response: null };
  for await (const ev of stream) {
    out.types.push(ev.type);
    if (ev.type === 'response.output_text.delta') out.text += ev.delta;
    if (ev.type === 'response.completed' || ev.type === 'response.failed') out.response = ev.response;
  }
  return out;
});
