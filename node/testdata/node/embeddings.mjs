// Calls client.embeddings.create once per operation; each operation is the
// request body as the SDK takes it, e.g. {"model": "...", "input": "hi"}.
// Without encoding_format the SDK asks for base64 and decodes the vectors
// itself, so results always hold arrays of numbers.
import { run } from './harness.mjs';

await run((client, params) => client.embeddings.create(params));
