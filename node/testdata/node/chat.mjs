// Calls client.chat.completions once per operation; each operation is the
// request body as the SDK takes it. A streaming request is read to its end
// with the SDK's own stream reader and summarised: the chunks' count, the
// text, the tool calls assembled from their deltas (as a client app would),
// the finish reason and the usage.
import { run } from './harness.mjs';

await run(async (client, params) => {
  if (!params.stream) {
    return client.chat.completions.create(params);
  }
  const stream = await client.chat.completions.create(params);
  const out = { chunks: 0, content: '', toolCalls: [], finishReason: null, usage: null };
  for await (const chunk of stream) {
    out.chunks++;
    if (chunk.usage) {
      out.usage = chunk.usage;
    }
    for (const choice of chunk.choices ?? []) {
      const d = choice.delta ?? {};
      if (d.content) {
        out.content += d.content;
      }
      for (const tc of d.tool_calls ?? []) {
        const call = (out.toolCalls[tc.index] ??= { id: '', name: '', arguments: '' });
        if (tc.id) call.id = tc.id;
        if (tc.function?.name) call.name += tc.function.name;
        if (tc.function?.arguments) call.arguments += tc.function.arguments;
      }
      if (choice.finish_reason) {
        out.finishReason = choice.finish_reason;
      }
    }
  }
  return out;
});
