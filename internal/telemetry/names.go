package telemetry

// Attribute keys. The gen_ai.* ones are the OpenTelemetry GenAI semantic
// conventions'; the tandem.* ones are Tandem's own.
const (
	AttrOperation      = "gen_ai.operation.name"          // "chat" or "text_completion"
	AttrModel          = "gen_ai.request.model"           // the model the client asked for
	AttrMaxTokens      = "gen_ai.request.max_tokens"      // when the client gave it
	AttrInputTokens    = "gen_ai.usage.input_tokens"      // prompt tokens
	AttrOutputTokens   = "gen_ai.usage.output_tokens"     // generated tokens
	AttrFinishReasons  = "gen_ai.response.finish_reasons" // string list
	AttrRequestID      = "gen_ai.request.id"              // the router's request id (as llm-d names it)
	AttrErrorType      = "error.type"                     // set on failed spans
	AttrRole           = "tandem.role"                    // router, prefill, decode, serve (resource)
	AttrRoom           = "tandem.room.id"                 // 32 hex digits
	AttrPath           = "tandem.pd.path"                 // local or disaggregated
	AttrPathReason     = "tandem.pd.reason"               // why that path (short_prompt, long_prompt, ...)
	AttrOutcome        = "tandem.outcome"                 // ok, failed, cancelled
	AttrReason         = "tandem.reason"                  // why it failed or was cancelled
	AttrLeg            = "tandem.leg"                     // prefill, decode or local
	AttrWorker         = "tandem.worker"                  // a worker's URL (router spans)
	AttrAttempt        = "tandem.attempt"                 // 1 for the first pair, 2.. for retries
	AttrSample         = "tandem.sample"                  // the sample's index (n > 1, lists of prompts)
	AttrPeer           = "tandem.peer"                    // the transfer peer of a room
	AttrKVBytes        = "tandem.kv.bytes"                // KV bytes a room moved
	AttrComputedTokens = "tandem.prefill.computed_tokens" // a prefill chunk event's tokens computed so far
)

// Outcomes (AttrOutcome).
const (
	OutcomeOK        = "ok"
	OutcomeFailed    = "failed"
	OutcomeCancelled = "cancelled"
)

// Operation names (AttrOperation) of the two generation endpoints.
const (
	OpChat       = "chat"
	OpCompletion = "text_completion"
)

// Span names. The router's request span is "{operation} {model}" as the
// GenAI conventions name inference spans (SpanName).
const (
	SpanRoute         = "tandem.route"           // router: arrival to the first leg sent (read, decide)
	SpanAttempt       = "tandem.attempt"         // router: one pair (or local worker) tried for a sample
	SpanLegPrefill    = "tandem.leg.prefill"     // router: the prefill leg (CLIENT)
	SpanLegDecode     = "tandem.leg.decode"      // router: the decode leg (CLIENT)
	SpanLegLocal      = "tandem.leg.local"       // router: a local leg (CLIENT)
	SpanPrefillRoom   = "tandem.prefill"         // prefill worker: the room (SERVER)
	SpanDecodeRoom    = "tandem.decode"          // decode worker: the room (SERVER)
	SpanLocalRoom     = "tandem.local"           // decode worker: a local leg (SERVER)
	SpanQueue         = "tandem.queue"           // prefill: leg received to the engine admitting the prompt
	SpanCompute       = "tandem.prefill.compute" // prefill: the prompt computed (chunks as events)
	SpanTransfer      = "tandem.kv_transfer"     // prefill: the prompt computed to decode acknowledging its KV
	SpanKVWait        = "tandem.kv_wait"         // decode: leg received to the KV in and the sequence resumed
	SpanFirstDecode   = "tandem.first_decode"    // decode: resumed to its first token out
	SpanDecode        = "tandem.decoding"        // decode: first token out to the stream's end
	EventPrefillChunk = "prefill_chunk"          // an engine step of the prompt
	EventRetry        = "retry"                  // the router tries another pair
)

// SpanName is the GenAI inference span name: "{operation} {model}", or
// the operation alone when the model is unknown.
func SpanName(op, model string) string {
	if model == "" {
		return op
	}
	return op + " " + model
}
