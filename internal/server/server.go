package server

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"tandem/internal/api/drain"
	"tandem/internal/api/httpx"
	"tandem/internal/api/leg"
	"tandem/internal/api/openai"
	"tandem/internal/engine"
	"tandem/internal/invariant"
)

// Defaults for Options fields left zero.
const (
	DefaultMaxBodyBytes     = 8 << 20
	DefaultBodyTimeout      = 30 * time.Second
	DefaultWriteTimeout     = 30 * time.Second
	DefaultCompletionTokens = 16 // max_tokens of /v1/completions when not given, as OpenAI
)

// Options configures a Server.
type Options struct {
	// ModelName is the model id the server answers to and reports; default
	// the model's general.name, else "tandem".
	ModelName string
	// Logger receives request failures and panics; default slog.Default().
	Logger *slog.Logger
	// Registry receives the server's metrics and is what /metrics serves;
	// default a new registry.
	Registry *prometheus.Registry
	// MaxBodyBytes bounds request bodies (413 above it).
	MaxBodyBytes int64
	// BodyTimeout bounds reading a request body.
	BodyTimeout time.Duration
	// WriteTimeout bounds each write to a client: a whole non-streamed
	// answer, or one streamed chunk. A client that stops reading for longer
	// loses its request (the engine stream is cancelled).
	WriteTimeout time.Duration
	// DefaultCompletionTokens is max_tokens for /v1/completions requests
	// that give none (chat requests default to the rest of the context).
	DefaultCompletionTokens int
	// JSONMaxWhitespace, when > 0, lets structured JSON output (schemas,
	// json_object, tool-call arguments) put any run of space, tab, newline
	// and CR up to this many bytes between tokens
	// (grammar.Options.MaxWhitespace). 0: compact whitespace, one space or
	// a newline and bounded indentation; structured_outputs
	// .disable_any_whitespace still asks for none.
	JSONMaxWhitespace int
	// SystemFingerprint, if set, is reported in every answer.
	SystemFingerprint string
	// LegKeys, when set (a prefill or decode worker), makes every
	// generation request prove that the router sent it: a request without
	// a valid leg signature (package leg) gets 401 once its body is read,
	// before it is parsed or reaches Legs. Without LegKeys the
	// X-Tandem-* headers are ignored.
	LegKeys *leg.Keys
	// Legs serves the legs LegKeys verified (a PD worker sets both;
	// without LegKeys it is never called). A server with LegKeys and no
	// Legs answers every verified leg 500.
	Legs Legs
	// APIKey, when set, is required on every /v1/* request as
	// "Authorization: Bearer APIKey" (401 otherwise, before the body is
	// read), as vLLM's --api-key. /health, /ready and /metrics stay open.
	APIKey string
	// Mounts are more handlers served beside the API, by ServeMux pattern
	// (a PD worker's "/pd/" and "/debug/"); they get the body deadline but
	// not the API's metrics or method checks.
	Mounts map[string]http.Handler
	// ChatTemplate, when not empty, is the Jinja chat template used instead
	// of the model's tokenizer.chat_template (--chat-template).
	ChatTemplate string
	// ReasoningParser selects how chat output is split into
	// reasoning_content and content: "none", "think" (<think>...</think>),
	// "harmony" (gpt-oss's channels, tool calls included) or "" / "auto"
	// (harmony when the chat template writes harmony, else think when it
	// writes <think>).
	ReasoningParser string
	// ToolCallParser is the tool-call syntax chat output is parsed in
	// when a request has tools: "hermes", "llama3_json", "mistral",
	// "generic", or "" / "auto" (chosen from the chat template; see
	// toolcall.Detect). --tool-call-parser.
	ToolCallParser string
	// MaxTokenize bounds the /tokenize and /detokenize requests worked on
	// at once; as many times tokenizeQueueFactor more wait (each at most
	// tokenizeWait), and the rest get 429. Default min(GOMAXPROCS, 4): the
	// work is CPU-bound, so more at once only adds memory.
	MaxTokenize int
	// Health, when set, says whether a part of the worker outside the
	// engine is degraded, and why (a PD worker's core lease): /health then
	// answers 200 with status "degraded" and the reason instead of "ok".
	// The worker still serves, so it stays 200 (the router keeps it).
	Health func() (degraded bool, reason string)
	// Embeddings, when set, serves POST /v1/embeddings (package embed's
	// Service); without it the endpoint answers 400 (not an embedding
	// model).
	Embeddings Embedder
}

// Server serves the OpenAI-compatible API over a Backend. Create it with
// New; it is safe for concurrent use.
type Server struct {
	b       Backend
	o       Options
	log     *slog.Logger
	reg     *prometheus.Registry
	met     *metrics
	chat    *chatFormat
	think   bool // chat output is split into reasoning_content and content
	harmony bool // chat output is read as harmony (gpt-oss): reasoning, content and tool calls
	tools   *toolConfig
	gate    *drain.Gate // the phase: ready, draining; counts generation requests
	created int64
	handler http.Handler
	// grammars caches compiled structured-output grammars (constraint.go).
	grammars grammarCache
	// tokenizer admits /tokenize and /detokenize requests (tokenize.go).
	tokenizer *gate
}

// New builds a server over b. It starts not ready (phase starting): /ready
// answers 503 and generation endpoints refuse requests until
// SetReady(true). /health answers 200 in every phase. A chat template that
// is refused (see chat.NewTemplate) is logged and replaced by the fallback
// format. LegKeys without Legs is logged as an error: such a server
// answers every verified leg 500 (it still serves /tokenize and the
// mounts).
func New(b Backend, o Options) *Server {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Registry == nil {
		o.Registry = prometheus.NewRegistry()
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if o.BodyTimeout <= 0 {
		o.BodyTimeout = DefaultBodyTimeout
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = DefaultWriteTimeout
	}
	if o.DefaultCompletionTokens <= 0 {
		o.DefaultCompletionTokens = DefaultCompletionTokens
	}
	if o.MaxTokenize <= 0 {
		o.MaxTokenize = min(runtime.GOMAXPROCS(0), 4)
	}
	if o.ModelName == "" {
		o.ModelName = b.ModelConfig().Name
	}
	if o.ModelName == "" {
		o.ModelName = "tandem"
	}
	s := &Server{b: b, o: o, log: o.Logger, reg: o.Registry, created: time.Now().Unix(), gate: drain.New(),
		tokenizer: newGate(o.MaxTokenize, tokenizeQueueFactor*o.MaxTokenize, tokenizeWait)}
	s.met = newMetrics(o.Registry, b, o.Logger, o.ModelName)
	chat, err := newChatFormat(b.Tokenizer(), o.ChatTemplate)
	if err != nil {
		s.log.Error("the model's chat template is refused (it does not compile, or breaks a budget on a representative conversation); chat uses the fallback ChatML format", "err", err)
	}
	s.chat = chat
	think, err := reasoningEnabled(o.ReasoningParser, chat.tmpl)
	if err != nil {
		s.log.Error("reasoning parser disabled", "err", err)
	}
	s.think = think
	if s.harmony = harmonyEnabled(o.ReasoningParser, chat.tmpl); s.harmony {
		s.think = false
	}
	tools, err := newToolConfig(o.ToolCallParser, chat.tmpl, b.Tokenizer())
	if err != nil {
		s.log.Error("tool call parser unknown; choosing it from the chat template", "err", err)
		tools, _ = newToolConfig("", chat.tmpl, b.Tokenizer())
	}
	s.tools = tools
	if !chat.tmpl.RendersTools() {
		s.log.Warn("the chat template does not render tools: a chat request's tools never reach the prompt, so the model does not see them "+
			"(its answers to such requests carry a Warning header; tool_choice required or named still constrains the output to a call); "+
			"give a template with a tools section with --chat-template", "fallback_format", chat.tmpl.Fallback())
	}
	if o.LegKeys != nil && o.Legs == nil {
		s.log.Error("server: LegKeys without Legs: every verified router leg will be answered 500")
	}
	s.handler = s.routes()
	return s
}

// SetReady makes a starting server ready (it takes generation requests,
// /ready answers 200), or, with false, a ready one starting again; it
// never undoes a drain (see Gate).
func (s *Server) SetReady(ready bool) { s.gate.SetReady(ready) }

// Gate returns the server's phase and count of generation requests: the
// process drains through it (package drain). A generation request is
// admitted, counted until its handler returns, or refused: 503 while
// starting, the draining answer (503, code "draining") once the drain's
// settle window has passed.
func (s *Server) Gate() *drain.Gate { return s.gate }

// Handler returns the HTTP handler for every endpoint.
func (s *Server) Handler() http.Handler { return s.handler }

// HTTPServer returns an http.Server for addr with s's handler and
// conservative timeouts: headers must arrive within 10 s, a request body
// within BodyTimeout of its headers, idle keep-alive connections close
// after 2 min, headers are limited to 64 KiB. It has no overall read or
// write timeout (ReadTimeout would also cancel long streams, and streams
// are long); the handler bounds body reads and each write itself.
func (s *Server) HTTPServer(addr string) *http.Server { return httpx.Server(addr, s.handler, s.log) }

// route is one endpoint: its metric label, the methods it takes and its
// handler.
type route struct {
	name    string
	methods []string
	h       func(w http.ResponseWriter, r *http.Request)
}

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	add := func(path string, rt route) {
		mux.Handle(path, s.wrap(rt))
	}
	add("/v1/completions", route{"completions", []string{http.MethodPost}, s.admit(s.handleCompletions)})
	add("/v1/chat/completions", route{"chat", []string{http.MethodPost}, s.admit(s.handleChat)})
	add("/v1/embeddings", route{"embeddings", []string{http.MethodPost}, s.admit(s.handleEmbeddings)})
	add("/v1/models", route{"models", []string{http.MethodGet, http.MethodHead}, s.handleModels})
	add("/v1/models/{id}", route{"models", []string{http.MethodGet, http.MethodHead}, s.handleModel})
	add("/tokenize", route{"tokenize", []string{http.MethodPost}, s.handleTokenize})
	add("/detokenize", route{"detokenize", []string{http.MethodPost}, s.handleDetokenize})
	add("/health", route{"health", []string{http.MethodGet, http.MethodHead}, s.handleHealth})
	add("/ready", route{"ready", []string{http.MethodGet, http.MethodHead}, s.gate.ServeReady})
	add("/metrics", route{"metrics", []string{http.MethodGet, http.MethodHead}, promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{}).ServeHTTP})
	add("/", route{"other", nil, func(w http.ResponseWriter, r *http.Request) {
		httpx.WriteError(w, openai.NotFound(r.URL.Path))
	}})
	for pattern, h := range s.o.Mounts {
		mux.Handle(pattern, h)
	}
	return s.gate.CloseConnections(s.bodyDeadline(mux))
}

// admit counts a generation request in the server's gate for as long as
// h runs, or answers the gate's refusal (not ready, draining).
func (s *Server) admit(h func(w http.ResponseWriter, r *http.Request)) func(w http.ResponseWriter, r *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		if !s.gate.Admit(w) {
			return
		}
		defer s.gate.Leave()
		h(w, r)
	}
}

// bodyDeadline gives every request that has a body BodyTimeout from its
// headers to send all of it. The generation handlers lift the deadline
// once they have read the body (a deadline left on the connection would
// end a long stream); any other handler leaves it, so a body it does not
// read, which net/http would discard after the answer, cannot trickle in
// forever and hold the connection.
func (s *Server) bodyDeadline(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		httpx.BodyDeadline(w, r, s.o.BodyTimeout)
		h.ServeHTTP(w, r)
	})
}

// wrap checks the method, counts the answer and turns a panic into a 500.
func (s *Server) wrap(rt route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &httpx.Recorder{ResponseWriter: w}
		defer func() {
			if v := recover(); v != nil {
				if _, broken := v.(*invariant.Error); broken || v == http.ErrAbortHandler {
					panic(v) // a broken invariant stops the process (package invariant); net/http handles the abort
				}
				s.log.Error("handler panicked", "path", r.URL.Path, "panic", v, "stack", string(debug.Stack()))
				if rec.Status == 0 {
					httpx.WriteError(rec, openai.Internal("unexpected failure; see the server log"))
				}
			}
			s.met.requests.WithLabelValues(rt.name, fmt.Sprint(rec.StatusOr200())).Inc()
		}()
		if strings.HasPrefix(r.URL.Path, "/v1/") && !s.checkAPIKey(rec, r) {
			return
		}
		if !httpx.CheckMethod(rec, r, rt.methods) {
			return
		}
		rt.h(rec, r)
	})
}

// handleHealth answers liveness: 200 in every phase, with the phase's
// name, or "degraded" and the reason while Options.Health says so.
func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	if s.o.Health != nil {
		if degraded, reason := s.o.Health(); degraded {
			httpx.WriteJSON(w, http.StatusOK, map[string]string{"status": "degraded", "reason": reason})
			return
		}
	}
	s.gate.ServeHealth(w, r)
}

func (s *Server) modelEntry() openai.Model {
	return openai.Model{ID: s.o.ModelName, Object: openai.ObjectModel, Created: s.created, OwnedBy: openai.OwnedBy,
		MaxModelLen: s.b.ModelConfig().Context}
}

func (s *Server) handleModels(w http.ResponseWriter, r *http.Request) {
	httpx.WriteJSON(w, http.StatusOK, openai.ModelList{Object: openai.ObjectList, Data: []openai.Model{s.modelEntry()}})
}

func (s *Server) handleModel(w http.ResponseWriter, r *http.Request) {
	if id := r.PathValue("id"); id != s.o.ModelName {
		httpx.WriteError(w, openai.ModelNotFound(id, s.o.ModelName))
		return
	}
	httpx.WriteJSON(w, http.StatusOK, s.modelEntry())
}

// readBody reads a request body within MaxBodyBytes and BodyTimeout.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, *openai.Error) {
	return httpx.ReadBody(w, r, s.o.MaxBodyBytes, s.o.BodyTimeout)
}

// submitError maps a Backend.Submit error to an API error.
func submitError(err error, param string) *openai.Error {
	var se StatusError
	switch {
	case errors.As(err, &se):
		return statusErrorBody(se)
	case errors.Is(err, engine.ErrQueueFull):
		return openai.RateLimited(err.Error())
	case errors.Is(err, engine.ErrGrammarTooCostly):
		return grammarCostError(err)
	case errors.Is(err, engine.ErrTooLong):
		e := openai.Invalid(param, openai.CodeContextLength, "%v", err)
		return e
	case errors.Is(err, engine.ErrBadRequest):
		return openai.Invalid(param, openai.CodeInvalidValue, "%v", err)
	case errors.Is(err, engine.ErrClosed):
		return openai.Unavailable("the engine is shutting down")
	}
	return openai.Internal(err.Error())
}

// grammarCostError is the 400 of a request whose output constraint costs
// too much to enforce (engine.ErrGrammarTooCostly: refused at admission,
// or ended mid-generation with finish reason grammar_budget), nil for
// other errors.
func grammarCostError(err error) *openai.Error {
	if !errors.Is(err, engine.ErrGrammarTooCostly) {
		return nil
	}
	// The engine's error repeats the sentinels this message already says.
	why := strings.TrimPrefix(err.Error(), engine.ErrBadRequest.Error()+": ")
	why = strings.TrimPrefix(why, engine.ErrGrammarTooCostly.Error()+": ")
	return openai.Invalid("", openai.CodeInvalidValue,
		"The request's output constraint (its response_format, structured_outputs, guided_*, grammar or tool schemas) is too costly to enforce: %s. "+
			"Simplify it: an ambiguous grammar, whose alternatives read the same text, makes every token mask expensive.", why)
}

// newID returns prefix followed by 24 random hex digits.
func newID(prefix string) string {
	var b [12]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// randomSeed returns a seed for requests that give none.
func randomSeed() uint64 {
	var b [8]byte
	rand.Read(b[:])
	var x uint64
	for _, c := range b {
		x = x<<8 | uint64(c)
	}
	return x
}
