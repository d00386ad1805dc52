package router

import "time"

// Limits on what the router holds or reads. Each has a rejection path: a
// client body over its limit (Options.MaxBodyBytes) is a 413, a worker body
// over its limit fails that leg, more concurrent requests than
// Options.MaxRequests get a 429.
const (
	// legBodyBytesMax bounds a worker's whole non-streamed answer (prefill's
	// answer carries the prompt logprobs, so this is generous).
	legBodyBytesMax = 128 << 20
	// errorBodyBytesMax bounds a worker's error answer.
	errorBodyBytesMax = 64 << 10
	// modelsBodyBytesMax bounds a proxied /v1/models answer.
	modelsBodyBytesMax = 1 << 20
	// debugBodyBytesMax bounds one worker's /debug/rooms document.
	debugBodyBytesMax = 32 << 20
	// sseEventBytesMax bounds one server-sent event from a decode worker.
	sseEventBytesMax = 16 << 20
	// historyMax bounds the transitions kept per request record.
	historyMax = 32
	// attemptsMax is how many pairs one sample may be sent to: a retry is
	// allowed only when nothing of the failed attempt reached the client.
	attemptsMax = 3
	// drainedRetriesMax bounds the attempts beyond attemptsMax that
	// draining workers refused (each is excluded after its refusal, so a
	// pool has at most as many as it has workers).
	drainedRetriesMax = 16
	// prefillGraceMax is how long a sample whose decode leg finished waits
	// for its prefill leg's answer before cancelling it.
	prefillGraceMax = 5 * time.Second
	// debugFetchTimeout bounds one worker's /debug/rooms fetch.
	debugFetchTimeout = 3 * time.Second
	// modelsTimeout bounds a proxied /v1/models request.
	modelsTimeout = 5 * time.Second
	// infoTimeout bounds a GET /pd/info made while picking a pair.
	infoTimeout = 2 * time.Second
	// dialTimeout bounds connecting to a worker.
	dialTimeout = 5 * time.Second
)

// Defaults for Options fields left zero.
const (
	DefaultHealthInterval  = time.Second
	DefaultHealthTimeout   = 500 * time.Millisecond
	DefaultLegTimeout      = 5 * time.Minute
	DefaultRequestTimeout  = 30 * time.Minute
	DefaultMaxBodyBytes    = 8 << 20
	DefaultBodyTimeout     = 30 * time.Second
	DefaultWriteTimeout    = 30 * time.Second
	DefaultFinishedRecords = 1024
	DefaultMaxRequests     = 4096
	DefaultBreakerFailures = 3
	DefaultBreakerCooldown = 2 * time.Second
	// DefaultPDThreshold is `tandem route`'s and `tandem up`'s
	// --pd-threshold (Options' zero disaggregates everything): prompts
	// under 128 tokens run locally on a decode worker. A 128-token prefill
	// costs about 256 ms on one core at 2 ms a token (the 110m model), about
	// one 250 ms inter-token SLO even if the decode worker ran it in one
	// step, while the PD path costs only 3-10 ms more than its prefill but
	// puts the prompt in the prefill workers' queue. See the router's
	// README for the measurement.
	DefaultPDThreshold = 128
)
