package openai

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Error types, as OpenAI names them in error.type.
const (
	TypeInvalidRequest = "invalid_request_error"
	TypeNotFound       = "not_found_error"
	TypeRateLimit      = "rate_limit_error"
	TypeServer         = "server_error"
	TypeUnavailable    = "service_unavailable_error"
)

// Error codes used in error.code.
const (
	CodeContextLength   = "context_length_exceeded"
	CodeModelNotFound   = "model_not_found"
	CodeUnsupported     = "unsupported_parameter"
	CodeInvalidValue    = "invalid_value"
	CodeInvalidType     = "invalid_type"
	CodeInvalidJSON     = "invalid_json"
	CodeTooLarge        = "request_too_large"
	CodeMethod          = "method_not_allowed"
	CodeRateLimit       = "rate_limit_exceeded"
	CodeUnavailable     = "service_unavailable"
	CodeInternal        = "internal_error"
	CodeUnknownEndpoint = "unknown_url"
	CodeInvalidAPIKey   = "invalid_api_key"
)

// DefaultRetryAfter is the Retry-After of a 429 that names no other: the
// queues it met turn over within seconds.
const DefaultRetryAfter = time.Second

// Error is an API error: the HTTP status to answer with and the fields of
// OpenAI's error body. Param and Code are omitted (null) when empty.
type Error struct {
	Status  int
	Message string
	Type    string
	Param   string
	Code    string
	// RetryAfter, when positive, is sent as the Retry-After header (in
	// whole seconds, rounded up) with a 429 or 503.
	RetryAfter time.Duration
}

// Error returns the message, with the parameter it concerns.
func (e *Error) Error() string {
	if e.Param != "" {
		return fmt.Sprintf("%s (param %s)", e.Message, e.Param)
	}
	return e.Message
}

// ErrorBody is the JSON document of an error response.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is the "error" object of an error response.
type ErrorDetail struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

// Body returns the error's JSON document.
func (e *Error) Body() ErrorBody {
	d := ErrorDetail{Message: e.Message, Type: e.Type}
	if e.Param != "" {
		p := e.Param
		d.Param = &p
	}
	if e.Code != "" {
		c := e.Code
		d.Code = &c
	}
	return ErrorBody{Error: d}
}

// MarshalBody encodes the error's JSON document.
func (e *Error) MarshalBody() []byte {
	b, err := json.Marshal(e.Body())
	if err != nil { // cannot happen: only strings
		return []byte(`{"error":{"message":"internal error","type":"server_error","param":null,"code":null}}`)
	}
	return b
}

// Invalid returns a 400 invalid_request_error about param.
func Invalid(param, code, format string, args ...any) *Error {
	return &Error{Status: http.StatusBadRequest, Type: TypeInvalidRequest, Param: param, Code: code,
		Message: fmt.Sprintf(format, args...)}
}

// ContextLengthExceeded returns the 400 error for a request that does not
// fit the model's context window (the served max_model_len), worded as
// vLLM's OpenAI server words it (which follows OpenAI's): the input is
// "the messages" for a chat request, "the prompt" for a completion (param
// "prompt" or "prompt[i]").
func ContextLengthExceeded(param string, contextTokens, promptTokens, maxTokens int) *Error {
	what := "messages"
	if strings.HasPrefix(param, "prompt") {
		what = "prompt"
	}
	var msg string
	if maxTokens > 0 {
		msg = fmt.Sprintf("This model's maximum context length is %d tokens. However, you requested %d tokens (%d in the %s, %d in the completion). Please reduce the length of the %s or completion.",
			contextTokens, promptTokens+maxTokens, promptTokens, what, maxTokens, what)
	} else {
		msg = fmt.Sprintf("This model's maximum context length is %d tokens. However, you requested %d tokens in the %s. Please reduce the length of the %s.",
			contextTokens, promptTokens, what, what)
	}
	return &Error{Status: http.StatusBadRequest, Type: TypeInvalidRequest, Param: param, Code: CodeContextLength, Message: msg}
}

// ModelNotFound returns the 404 error for a model this server does not serve.
func ModelNotFound(model, served string) *Error {
	return &Error{Status: http.StatusNotFound, Type: TypeInvalidRequest, Param: "model", Code: CodeModelNotFound,
		Message: fmt.Sprintf("The model %q does not exist; this server serves %q.", model, served)}
}

// TooLarge returns the 413 error for a body over limit bytes.
func TooLarge(limit int64) *Error {
	return &Error{Status: http.StatusRequestEntityTooLarge, Type: TypeInvalidRequest, Code: CodeTooLarge,
		Message: fmt.Sprintf("The request body is larger than the limit of %d bytes.", limit)}
}

// MethodNotAllowed returns the 405 error for a method the endpoint does not
// accept; allowed lists the ones it does.
func MethodNotAllowed(method, path, allowed string) *Error {
	return &Error{Status: http.StatusMethodNotAllowed, Type: TypeInvalidRequest, Code: CodeMethod,
		Message: fmt.Sprintf("Method %s is not allowed on %s; use %s.", method, path, allowed)}
}

// NotFound returns the 404 error for an unknown path.
func NotFound(path string) *Error {
	return &Error{Status: http.StatusNotFound, Type: TypeInvalidRequest, Code: CodeUnknownEndpoint,
		Message: fmt.Sprintf("Unknown endpoint %s.", path)}
}

// RateLimited returns the 429 error for a full queue, with a Retry-After
// of DefaultRetryAfter.
func RateLimited(detail string) *Error {
	return &Error{Status: http.StatusTooManyRequests, Type: TypeRateLimit, Code: CodeRateLimit,
		Message: "The server is overloaded: " + detail, RetryAfter: DefaultRetryAfter}
}

// InvalidAPIKey returns the 401 for a missing or wrong API key, worded
// the same by `tandem serve` and the router (type invalid_request_error,
// code invalid_api_key, as OpenAI answers a bad key).
func InvalidAPIKey() *Error {
	return &Error{Status: http.StatusUnauthorized, Type: TypeInvalidRequest, Code: CodeInvalidAPIKey,
		Message: "Incorrect or missing API key: send it as \"Authorization: Bearer KEY\" with the key given to --api-key or $TANDEM_API_KEY."}
}

// Unavailable returns the 503 error for a server that is not ready or is
// shutting down.
func Unavailable(detail string) *Error {
	return &Error{Status: http.StatusServiceUnavailable, Type: TypeUnavailable, Code: CodeUnavailable,
		Message: "The server is unavailable: " + detail}
}

// Internal returns a 500 server_error.
func Internal(detail string) *Error {
	return &Error{Status: http.StatusInternalServerError, Type: TypeServer, Code: CodeInternal,
		Message: "The server failed: " + detail}
}
