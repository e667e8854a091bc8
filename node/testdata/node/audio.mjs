// Audio through the official client, one call per operation:
//   {"op": "transcribe", "file": "/path/to/clip.wav", "params": {"model": "...", ...}}
//     client.audio.transcriptions.create with the file read from disk as a
//     stream; the result is the SDK's return value (an object for json and
//     verbose_json, a string for text, srt and vtt).
//   {"op": "speech", "params": {"model": "...", "input": "...", "voice": "...", ...}}
//     client.audio.speech.create; the result is
//     {"contentType": <the response's Content-Type>, "audio": <base64 of the body>}.
import fs from 'node:fs';
import { run } from './harness.mjs';

await run(async (client, op) => {
  switch (op.op) {
    case 'transcribe':
      return client.audio.transcriptions.create({ ...op.params, file: fs.createReadStream(op.file) });
    case 'speech': {
      const resp = await client.audio.speech.create(op.params);
      const audio = Buffer.from(await resp.arrayBuffer());
      return { contentType: resp.headers.get('content-type'), audio: audio.toString('base64') };
    }
    default:
      throw new Error(`unknown op ${op.op}`);
  }
});
