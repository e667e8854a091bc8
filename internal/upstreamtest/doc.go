// Package upstreamtest provides a fake upstream LLM provider for tests and
// benchmarks: an HTTP server that speaks the OpenAI API under /v1 and the
// Anthropic Messages API at /v1/messages with the shapes of the real
// providers (recorded traffic is in testdata), and that can be scripted to
// fail the way real providers do.
//
// Normal answers are deterministic:
//
//   - GET /v1/models lists the ids given with [WithModels];
//     GET /v1/models/{id} returns one of them.
//   - POST /v1/chat/completions answers [EchoPrefix] + the last user
//     message, as a chat.completion or, with "stream": true, as
//     chat.completion.chunk server-sent events ending with "data: [DONE]"
//     (plus a usage chunk with stream_options.include_usage). When the
//     request offers tools, the answer calls them instead (arguments from
//     their JSON schema); after a "tool" message it answers with text again.
//   - POST /v1/messages answers an Anthropic message (text block echoing
//     the last user message, then tool_use blocks if tools are offered), or
//     its event stream: message_start, content_block_start, ping,
//     content_block_delta..., content_block_stop, message_delta,
//     message_stop. The anthropic-version header is required.
//   - POST /v1/embeddings answers the vectors [Vector] (or [TokenVector])
//     computes, as floats or base64 per encoding_format.
//   - POST /v1/audio/transcriptions and /v1/audio/translations answer
//     [Transcript] of the uploaded file in the requested response_format
//     (a token-billed model, "-transcribe" in its name, with stream=true:
//     transcript.text.delta events of [TranscriptDeltas], then
//     transcript.text.done with the text and usage; whisper models ignore
//     stream, as OpenAI's whisper-1 does);
//     POST /v1/audio/speech streams [SpeechAudio].
//   - Usage counts follow [Tokens].
//
// Requests are validated like the real APIs (400 in the provider's error
// shape for bad JSON or missing required fields) and recorded
// ([Server.Requests], [Server.Count]).
//
// Faults are scripted per route with [Server.Enqueue] (consumed in order)
// and [Server.SetDefault] (sticky):
//
//	up := upstreamtest.New(t)
//	up.Enqueue(upstreamtest.PathChatCompletions,
//		upstreamtest.RateLimited("2"),
//		upstreamtest.CutAfter(3),
//	)
//	// The first request gets a 429, the second a stream cut after 3
//	// chunks, the next ones normal answers.
//
// Clients that retry (the official OpenAI SDKs retry 408, 409, 429, 5xx
// and connection errors twice by default) consume one fault per attempt.
package upstreamtest
