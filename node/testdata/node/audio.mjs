// Audio through the official client, one call per operation:
//   {"op": "transcribe", "file": "/path/to/clip.wav", "params": {"model": "...", ...}}
//     client.audio.transcriptions.create with the file read from disk as a
//     stream; the result is the SDK's return value (an object for json and
//     verbose_json, a string for text, srt and vtt).
//   {"op": "transcribeStream", "file": "/path/to/clip.wav", "params": {"model": "...", ...}}
//     the same with stream: true, read with the SDK's own stream reader; the
//     result is {"events": [<each event as the SDK yielded it>]}, and
//     "error" (describeError's) when the stream raised one after them.
//   {"op": "speech", "params": {"model": "...", "input": "...", "voice": "...", ...}}
//     client.audio.speech.create; the result is
//     {"contentType": <the response's Content-Type>, "audio": <base64 of the body>}.
import fs from 'node:fs';
import { describeError, run } from './harness.mjs';

await run(async (client, op) => {
  switch (op.op) {
    case 'transcribe':
      return client.audio.transcriptions.create({ ...op.params, file: fs.createReadStream(op.file) });
    case 'transcribeStream': {
      const stream = await client.audio.transcriptions.create({ ...op.params, file: fs.createReadStream(op.file), stream: true });
      const events = [];
      try {
        for await (const event of stream) {
          events.push(event);
        }
      } catch (err) {
        return { events, error: describeError(err) };
      }
      return { events };
    }
    case 'speech': {
      const resp = await client.audio.speech.create(op.params);
      const audio = Buffer.from(await resp.arrayBuffer());
      return { contentType: resp.headers.get('content-type'), audio: audio.toString('base64') };
    }
    default:
      throw new Error(`unknown op ${op.op}`);
  }
});
