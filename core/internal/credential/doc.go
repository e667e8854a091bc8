// Package credential picks which of a tenant's stored upstream connections
// serves a request, falls back to the next one when a connection fails, and
// keeps per-(connection, model) cooldowns so that failing connections are not
// hammered. Embeddings, chat and audio share it.
//
// A caller builds a [Request] from the tenant's active connections of one
// provider and hands [Engine.Do] an [Attempt] that makes one upstream call
// with one [Candidate]. The engine orders the candidates (by the router's
// tier, then ascending priority, then the "fill-first" or sticky
// "round-robin" strategy within a tier), skips the ones that are cooling
// down for the model, classifies every failure with [Classify], refreshes
// OAuth tokens once on 401/403, records cooldowns in a [Cooldowns] store
// and, when no candidate answers, reports why with an [*ExhaustedError]
// the HTTP layer can render (429 rate limited, 503 cooling down, the last
// upstream error, or 502 unreachable).
//
// The rules come from the project's decisions (Gateway: "all credentials rate
// limited", "fallback-eligible errors", "cooldowns", "credential order").
package credential
