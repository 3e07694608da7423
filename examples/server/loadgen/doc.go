// Package loadgen is a load generator for an OpenAI-compatible server
// such as examples/server: Clients concurrent streaming clients on
// POST /v1/completions, a seeded mix of prompt and output lengths with
// shared prefixes, bounded in count (Requests) and time (Duration). Its
// Report has requests/s, output tokens/s, time to first token and
// inter-token latency (p50, p99) as the clients saw them, and the
// preemptions the server counted (gpuarena_server_preemptions_total on
// /metrics). A run in which any request failed returns its Report with a
// *RequestsFailedError; requests that Duration cut are not failures.
// "server load" runs it against a server started in-process and checks,
// after the server's shutdown, that the ledger was at 0 and no goroutine
// is left.
package loadgen
