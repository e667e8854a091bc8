// Model listing. Each operation is one of:
//   {"op": "list"}                     every model, through the SDK's page iterator
//   {"op": "retrieve", "id": "..."}    one model
import { run } from './harness.mjs';

await run(async (client, op) => {
  switch (op.op) {
    case 'list': {
      const models = [];
      for await (const m of client.models.list()) {
        models.push(m);
      }
      return models;
    }
    case 'retrieve':
      return client.models.retrieve(op.id);
    default:
      throw new Error(`unknown models operation ${JSON.stringify(op.op)}`);
  }
});
