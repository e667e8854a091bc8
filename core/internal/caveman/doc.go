// Package caveman is the terse-output option: a system prompt, added to a
// chat request just before dispatch, that asks the model for short answers so
// that it spends fewer output tokens.
//
// There are six levels ([Levels]); [LevelFull] is the default. Each level has
// one prompt ([Prompt]), written for Switchboard. Every prompt tells the model
// to cut words but not facts, to leave code, paths, commands, error texts and
// URLs untouched, to write security warnings, irreversible actions and
// ordered multi-step instructions in plain full sentences, and never to
// mention the style.
//
// Language: lite, full and ultra answer in the user's language. The wenyan
// levels answer in a classical-Chinese register whatever the user writes in:
// picking a wenyan level is picking the output language (a "classical
// register" of English or German is not a thing, and the savings of those
// levels come from the density of literary Chinese). The safety carve-out
// still wins: warnings, irreversible actions and multi-step instructions are
// written plainly in the user's own language, because a misread step costs
// more than the tokens saved.
//
// Injection operates on raw JSON request bodies in the shape of the target
// format, after any format translation: [InjectOpenAI] (Chat Completions),
// [InjectResponses] (Responses API) and [InjectAnthropic] (Messages API).
// They keep every other field byte for byte (only the whitespace between
// top-level members is dropped) and the order of keys, and are idempotent: a body that already carries any level's prompt
// is returned unchanged, so a request that passes through two gateways, or
// is injected twice, never gets two (possibly contradicting) prompts. On
// error the caller should dispatch the original body: the option is an
// optimisation and never a reason to fail a request.
//
// [Resolve] combines the machine's settings with a per-connection
// [Override]; [OptedOut] reads the per-request opt-out headers.
package caveman
