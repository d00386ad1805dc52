package router

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/trace"

	"tandem/internal/api/drain"
	"tandem/internal/api/httpx"
	apileg "tandem/internal/api/leg"
	"tandem/internal/api/openai"
	"tandem/internal/discovery"
	"tandem/internal/pd/debugdoc"
	"tandem/internal/router/answer"
	"tandem/internal/router/pool"
	"tandem/internal/telemetry"
)

// Options configures a Router. Zero durations and sizes take the Default*
// values; negative ones are an error.
type Options struct {
	// Prefill and Decode are the workers' HTTP base URLs
	// ("http://host:port"; a bare "host:port" means http). At least one of
	// each; no URL twice. Empty when Source or Discovery gives the workers.
	Prefill []string
	Decode  []string
	// Source, when set, gives the workers instead of Prefill and Decode,
	// live: RunDiscovery runs it and reconciles the pool with each of its
	// snapshots (membership.go).
	Source discovery.Source
	// Discovery, when set and not static, is the configuration New builds
	// Source from (`tandem route --discovery`); its Logger, Registerer and
	// Probe are filled in from the router's (the probe carries the cluster
	// credential). A static one (or nil) means Prefill and Decode.
	Discovery *discovery.Config
	// Name is the router's name: its "worker" in /debug/rooms, and the
	// X-Tandem-Router header of every answer (which of several routers
	// behind one address answered); default "router".
	Name string
	// Logger receives health changes and failed requests; default
	// slog.Default().
	Logger *slog.Logger
	// Registry receives the router's metrics and is what /metrics serves;
	// default a new registry.
	Registry *prometheus.Registry
	// HealthInterval is the time between health rounds (GET /health and
	// /pd/status on every worker); HealthTimeout bounds each probe.
	HealthInterval time.Duration
	HealthTimeout  time.Duration
	// LegTimeout bounds how long a leg may send nothing: until its answer
	// starts, and between reads of it. A non-streamed leg (prefill's
	// always) sends nothing until it is done, so for it this bounds the
	// whole leg.
	LegTimeout time.Duration
	// RequestTimeout bounds a whole client request, legs included.
	RequestTimeout time.Duration
	// TokenizeTimeout bounds a proxied /tokenize or /detokenize request;
	// past it the client gets 504.
	TokenizeTimeout time.Duration
	// MaxBodyBytes bounds client request bodies (413 above it);
	// BodyTimeout bounds reading one.
	MaxBodyBytes int64
	BodyTimeout  time.Duration
	// WriteTimeout bounds each write to a client (one event, or a whole
	// answer). A client that stops reading for longer loses its request.
	WriteTimeout time.Duration
	// MaxRequests bounds the requests in flight that carry a body
	// (generation, embeddings, tokenizer; 429 above it, before the body
	// is read).
	MaxRequests int
	// FinishedRecords is how many finished rooms /debug/rooms keeps.
	FinishedRecords int
	// BreakerFailures consecutive failed legs open a worker's circuit
	// breaker (so does a failure rate of half its last 20 legs); while it
	// is open the worker gets no legs. After BreakerCooldown one probe leg
	// goes through: its success closes the breaker, its failure opens it
	// again.
	BreakerFailures int
	BreakerCooldown time.Duration
	// APIKey, when set, is required on every /v1/ request as
	// "Authorization: Bearer APIKey" (401 otherwise); /health and /metrics stay
	// open; /debug/* needs the cluster credential (LegKeys).
	APIKey string
	// AllowedOrigins are the browser origins ("https://app.example:8443",
	// or "*" for any) that get CORS headers and preflight answers; none:
	// no CORS headers at all.
	AllowedOrigins []string
	// LegKeys, from the cluster token, sign every leg and authenticate the
	// router to the workers' /pd/* and /debug/*; the router's own /debug/*
	// then requires their credential. nil: nothing signed or required.
	LegKeys *apileg.Keys
	// PDThreshold is selective disaggregation's threshold in prompt
	// tokens: a request whose prompt has fewer runs as one local leg on a
	// decode worker (which prefills it in its own batch); one with at least
	// this many, or whose size is unknown, is disaggregated. When no prefill
	// worker can be picked, a request runs locally whatever its length.
	// Unlike the other fields, 0 is not replaced by a default: it
	// disaggregates every request (and a failed prefill pick fails the
	// request); `tandem route` defaults to DefaultPDThreshold. See
	// disagg.go for how prompts are counted.
	PDThreshold int
	// PDSpill, when > 0 (and PDThreshold > 0), sends a long prompt as a
	// local leg to a decode worker when the least-queued prefill worker's
	// queued prefill tokens, the prompt included, are at least PDSpill
	// times the least-queued decode worker's (reason prefill_busy). 0:
	// never; otherwise at least 1. `tandem route` defaults to
	// DefaultPDSpill. See disagg.go.
	PDSpill float64
	// Tracing exports the router's spans (package telemetry); nil: the
	// no-op tracer (a client's trace context is still carried to the
	// workers).
	Tracing *telemetry.Tracing
}

// Router is the PD router: it takes OpenAI requests, sends each sample to
// a prefill and a decode worker at once under a fresh room id, and streams
// decode's answer back. Create it with New, serve Handler, and run Run in
// a goroutine for health checks. It is safe for concurrent use.
type Router struct {
	o           Options
	log         *slog.Logger
	tracer      trace.Tracer
	reg         *prometheus.Registry
	met         *metrics
	workers     *pool.Pool
	recs        *records
	transport   *http.Transport
	legClient   *http.Client
	probeClient *http.Client
	active      atomic.Int64
	front       front
	handler     http.Handler
	refusals    logLimit    // of the 401 log lines (refusallog.go)
	gate        *drain.Gate // ready from New; drains with the process
	// stop, cancelled by EndRequests, ends every request in flight.
	stop     context.Context
	stopWith context.CancelCauseFunc
	// src is the membership source (nil: the static Prefill and Decode
	// lists); synced is closed once the pool holds its first snapshot
	// (at once without a source); joinKick wakes RunDiscovery's probe of
	// workers that joined.
	src      discovery.Source
	srcKind  string
	synced   chan struct{}
	syncOnce sync.Once
	joinKick chan struct{}
}

// New checks o and builds a router. Every worker starts out of service
// until a health round (Run, or CheckNow) finds it healthy.
func New(o Options) (*Router, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	live := o.Source != nil
	if o.Discovery != nil {
		kind, _, err := discovery.ParseSpec(o.Discovery.Spec)
		if err != nil {
			return nil, fmt.Errorf("new router: %w", err)
		}
		live = live || kind != discovery.KindStatic
	}
	var prefill, decode []string
	var err error
	if live {
		if len(o.Prefill)+len(o.Decode) > 0 {
			return nil, errors.New("new router: --prefill and --decode are for a static fleet; with --discovery the workers come from the source alone")
		}
	} else {
		if prefill, err = normalizeURLs("--prefill", o.Prefill); err != nil {
			return nil, err
		}
		if decode, err = normalizeURLs("--decode", o.Decode); err != nil {
			return nil, err
		}
	}
	for _, p := range prefill {
		for _, d := range decode {
			if p == d {
				return nil, fmt.Errorf("new router: %s is given both as a prefill and as a decode worker", p)
			}
		}
	}
	fr, err := newFront(o)
	if err != nil {
		return nil, err
	}
	met, err := newMetrics(o.Registry)
	if err != nil {
		return nil, fmt.Errorf("new router: %w", err)
	}
	tr := &http.Transport{
		Proxy:                  nil, // workers are reached directly
		DialContext:            (&net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:           1024,
		MaxIdleConnsPerHost:    256,
		IdleConnTimeout:        90 * time.Second,
		TLSHandshakeTimeout:    10 * time.Second,
		ResponseHeaderTimeout:  0, // streams: each leg's own timeout covers it
		DisableCompression:     true,
		MaxResponseHeaderBytes: 64 << 10,
	}
	noRedirect := func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	rt := &Router{o: o, log: o.Logger, tracer: o.Tracing.Tracer(), reg: o.Registry, met: met, transport: tr,
		legClient:   &http.Client{Transport: tr, CheckRedirect: noRedirect},
		probeClient: &http.Client{Transport: o.LegKeys.Transport(tr), CheckRedirect: noRedirect, Timeout: max(o.HealthTimeout, infoTimeout, debugFetchTimeout, modelsTimeout)},
		recs:        newRecords(o.FinishedRecords, time.Now),
		front:       fr,
		refusals:    logLimit{burst: refusalLogBurst, every: refusalLogEvery},
		gate:        drain.New(),
	}
	rt.gate.SetReady(true) // nothing to load: /ready then depends on the workers
	rt.stop, rt.stopWith = context.WithCancelCause(context.Background())
	rt.workers, err = pool.New(pool.Config{Prefill: prefill, Decode: decode, Logger: o.Logger, Registry: o.Registry,
		Client: rt.probeClient, HealthTimeout: o.HealthTimeout, InfoTimeout: infoTimeout,
		BreakerFailures: o.BreakerFailures, BreakerCooldown: o.BreakerCooldown, Now: time.Now, OnDrop: rt.forgetWorker})
	if err != nil {
		return nil, fmt.Errorf("new router: %w", err)
	}
	if err := o.Registry.Register(workerCollector{rt.workers}); err != nil {
		return nil, fmt.Errorf("new router: register the worker gauges: %w", err)
	}
	if err := rt.initMembership(); err != nil {
		return nil, fmt.Errorf("new router: %w", err)
	}
	rt.handler = rt.routes()
	return rt, nil
}

func (o *Options) defaults() error {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Registry == nil {
		o.Registry = prometheus.NewRegistry()
	}
	if o.Name == "" {
		o.Name = "router"
	}
	for _, d := range []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{
		{"health interval", &o.HealthInterval, DefaultHealthInterval},
		{"health timeout", &o.HealthTimeout, DefaultHealthTimeout},
		{"leg timeout", &o.LegTimeout, DefaultLegTimeout},
		{"request timeout", &o.RequestTimeout, DefaultRequestTimeout},
		{"tokenize timeout", &o.TokenizeTimeout, DefaultTokenizeTimeout},
		{"body timeout", &o.BodyTimeout, DefaultBodyTimeout},
		{"write timeout", &o.WriteTimeout, DefaultWriteTimeout},
		{"breaker cooldown", &o.BreakerCooldown, DefaultBreakerCooldown},
	} {
		if *d.v < 0 {
			return fmt.Errorf("new router: the %s is negative (%s)", d.name, *d.v)
		}
		if *d.v == 0 {
			*d.v = d.def
		}
	}
	switch {
	case o.MaxBodyBytes < 0:
		return fmt.Errorf("new router: the body size limit is negative (%d)", o.MaxBodyBytes)
	case o.MaxBodyBytes == 0:
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	switch {
	case o.MaxRequests < 0:
		return fmt.Errorf("new router: the request limit is negative (%d)", o.MaxRequests)
	case o.MaxRequests == 0:
		o.MaxRequests = DefaultMaxRequests
	}
	switch {
	case o.BreakerFailures < 0:
		return fmt.Errorf("new router: the breaker failure count is negative (%d)", o.BreakerFailures)
	case o.BreakerFailures == 0:
		o.BreakerFailures = DefaultBreakerFailures
	}
	if o.PDThreshold < 0 {
		return fmt.Errorf("new router: the disaggregation threshold is negative (%d tokens); 0 disaggregates every request", o.PDThreshold)
	}
	if !(o.PDSpill == 0 || o.PDSpill >= 1) || math.IsInf(o.PDSpill, 0) {
		return fmt.Errorf("new router: the spill ratio is %v; give 0 (never run long prompts on a decode worker) or a finite ratio of at least 1", o.PDSpill)
	}
	switch {
	case o.FinishedRecords < 0:
		return fmt.Errorf("new router: the finished-record count is negative (%d)", o.FinishedRecords)
	case o.FinishedRecords == 0:
		o.FinishedRecords = DefaultFinishedRecords
	}
	return nil
}

// normalizeURLs checks worker URLs and returns them without a trailing
// slash; a bare host:port gets http://.
func normalizeURLs(flag string, urls []string) ([]string, error) {
	if len(urls) == 0 {
		return nil, fmt.Errorf("new router: no %s worker given; give at least one URL", flag)
	}
	seen := map[string]bool{}
	out := make([]string, 0, len(urls))
	for _, raw := range urls {
		s := strings.TrimSpace(raw)
		if !strings.Contains(s, "://") {
			s = "http://" + s
		}
		u, err := url.Parse(s)
		if err != nil {
			return nil, fmt.Errorf("new router: %s %q is not a URL: %w", flag, raw, err)
		}
		if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
			return nil, fmt.Errorf("new router: %s %q must be an http(s)://host:port base URL", flag, raw)
		}
		s = strings.TrimRight(u.String(), "/")
		if seen[s] {
			return nil, fmt.Errorf("new router: %s %s is given twice", flag, s)
		}
		seen[s] = true
		out = append(out, s)
	}
	return out, nil
}

// Handler returns the HTTP handler for every endpoint.
func (rt *Router) Handler() http.Handler { return rt.handler }

// HTTPServer returns an http.Server for addr with the router's handler:
// headers must arrive within 10 s, idle connections close after 2 min,
// headers are limited to 64 KiB. It has no overall read or write timeout:
// either would cut long streams (a read deadline that passes cancels the
// request). Instead every handler bounds its request body by BodyTimeout
// (a body that stalls gets 408 and its connection closed; the deadline is
// lifted once the body is in) and each write by WriteTimeout.
func (rt *Router) HTTPServer(addr string) *http.Server { return httpx.Server(addr, rt.handler, rt.log) }

// Run checks every worker's health now and then every HealthInterval,
// until ctx is done. The caller owns the goroutine running it.
func (rt *Router) Run(ctx context.Context) {
	t := time.NewTicker(rt.o.HealthInterval)
	defer t.Stop()
	for {
		rt.CheckNow(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// CheckNow runs one health round over every worker and waits for it:
// GET /health (and, when healthy, /pd/status, and /pd/info for a prefill
// worker whose transfer address is unknown), each within HealthTimeout.
// Two consecutive failures take a worker out; one success puts it back.
func (rt *Router) CheckNow(ctx context.Context) {
	rt.workers.Check(ctx)
}

// Close closes idle connections to the workers. Call it after the server
// has shut down.
func (rt *Router) Close() { rt.transport.CloseIdleConnections() }

// Gate returns the router's phase and count of generation requests, for
// the process's drain (package drain): from the drain's start /ready
// answers 503 and answers carry Connection: close; once its settle window
// passed, new generation requests get the draining answer.
func (rt *Router) Gate() *drain.Gate { return rt.gate }

// EndRequests ends every generation request in flight: the client gets a
// 503 (code "draining") when nothing of the answer was sent yet, else one
// error event; both legs of each are cancelled, so the workers end their
// rooms. A drain calls it when its deadline passed.
func (rt *Router) EndRequests() { rt.stopWith(errStopping) }

// route is one endpoint: its metrics label, the methods it takes and its
// handler.
type route struct {
	name    string
	methods []string
	h       http.HandlerFunc
}

func (rt *Router) routes() http.Handler {
	mux := http.NewServeMux()
	get := []string{http.MethodGet, http.MethodHead}
	post := []string{http.MethodPost}
	for path, r := range map[string]route{
		"/v1/completions":      {"completions", post, func(w http.ResponseWriter, r *http.Request) { rt.serveGeneration(w, r, endpointCompletions) }},
		"/v1/chat/completions": {"chat", post, func(w http.ResponseWriter, r *http.Request) { rt.serveGeneration(w, r, endpointChat) }},
		"/v1/embeddings":       {"embeddings", post, rt.serveEmbeddings},
		"/v1/models":           {"models", get, rt.serveModels},
		"/v1/models/{id}":      {"models", get, rt.serveModels},
		"/tokenize":            {"tokenize", post, rt.serveTokenizer},
		"/detokenize":          {"detokenize", post, rt.serveTokenizer},
		"/health":              {"health", get, rt.serveHealth},
		"/ready":               {"ready", get, rt.serveReady},
		"/metrics":             {"metrics", get, promhttp.HandlerFor(rt.reg, promhttp.HandlerOpts{}).ServeHTTP},
		"/debug/rooms":         {"debug", get, rt.guardDebug(rt.serveRooms)},
		"/debug/cluster":       {"debug", get, rt.guardDebug(rt.serveCluster)},
		"/dashboard":           {"dashboard", get, rt.serveDashboard},
		"/dashboard/login":     {"dashboard", post, rt.serveDashboardLogin},
		"/dashboard/data":      {"dashboard", get, rt.guardDebug(rt.serveDashboardData)},
		"/":                    {"other", nil, func(w http.ResponseWriter, r *http.Request) { httpx.WriteError(w, openai.NotFound(r.URL.Path)) }},
	} {
		mux.Handle(path, rt.wrap(r))
	}
	return rt.gate.CloseConnections(mux)
}

// wrap gives the request its id (echoed in X-Request-Id), answers CORS
// preflights, bounds the body's arrival, checks the method and the API
// key, and counts the answer.
func (rt *Router) wrap(r route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		rid := requestID(req)
		req = req.WithContext(context.WithValue(req.Context(), requestIDKey{}, rid))
		w.Header().Set(HeaderClientRequestID, rid)
		w.Header().Set(HeaderRouter, rt.o.Name)
		rec := &httpx.Recorder{ResponseWriter: w}
		defer func() {
			rt.met.requests.WithLabelValues(r.name, fmt.Sprint(rec.StatusOr200())).Inc()
		}()
		httpx.BodyDeadline(w, req, rt.o.BodyTimeout)
		if rt.front.cors(rec, req, r.methods) {
			return
		}
		if !httpx.CheckMethod(rec, req, r.methods) {
			return
		}
		if !rt.front.authorized(req) {
			if ok, held := rt.refusals.allow(); ok {
				rt.log.Info("request refused: missing or wrong API key", "request", rid, "path", httpx.Clip(req.URL.Path, refusalPathBytes),
					"path_bytes", len(req.URL.Path), "suppressed", held)
			}
			rec.Header().Set("WWW-Authenticate", `Bearer realm="tandem"`)
			httpx.WriteError(rec, unauthorized())
			return
		}
		r.h(rec, req)
	})
}

// healthDoc is the body of the router's /health and /ready.
type healthDoc struct {
	Status  string    `json:"status"` // ok, draining or unavailable
	Reason  string    `json:"reason,omitempty"`
	Prefill roleCount `json:"prefill"`
	Decode  roleCount `json:"decode"`
}

type roleCount struct {
	Healthy    int `json:"healthy"` // workers that take new legs: healthy and not draining
	Configured int `json:"configured"`
}

// readiness says whether the router takes requests: it is not draining
// and at least one worker of each role takes legs (with selective
// disaggregation on, a decode worker is enough: the reason says that
// prefill workers are missing).
func (rt *Router) readiness() (doc healthDoc, ready bool) {
	doc = healthDoc{Status: "ok"}
	doc.Prefill.Healthy, doc.Prefill.Configured = rt.workers.Count(pool.Prefill)
	doc.Decode.Healthy, doc.Decode.Configured = rt.workers.Count(pool.Decode)
	if p := rt.gate.Phase(); p != drain.Ready {
		doc.Status, doc.Reason = p.String(), "the router is stopping"
		return doc, false
	}
	var missing []string
	if doc.Prefill.Healthy == 0 {
		missing = append(missing, "prefill")
	}
	if doc.Decode.Healthy == 0 {
		missing = append(missing, "decode")
	}
	if len(missing) == 1 && missing[0] == "prefill" && rt.o.PDThreshold > 0 {
		// Selective disaggregation runs every request on decode workers.
		doc.Reason = "no healthy prefill worker: every request runs as a local leg on a decode worker"
		return doc, true
	}
	if len(missing) > 0 {
		doc.Status = "unavailable"
		doc.Reason = "no healthy " + strings.Join(missing, " or ") + " worker"
		return doc, false
	}
	return doc, true
}

// serveReady answers readiness: 200 when the router takes requests (see
// readiness), else 503 with the reason.
func (rt *Router) serveReady(w http.ResponseWriter, r *http.Request) {
	doc, ready := rt.readiness()
	status := http.StatusOK
	if !ready {
		status = http.StatusServiceUnavailable
	}
	httpx.WriteJSON(w, status, doc)
}

// serveHealth answers liveness: 200 while the process serves, draining
// included, with the same document as /ready (status "unavailable" when no
// worker of a role takes legs, "draining" while the router drains).
func (rt *Router) serveHealth(w http.ResponseWriter, r *http.Request) {
	doc, _ := rt.readiness()
	httpx.WriteJSON(w, http.StatusOK, doc)
}

// serveModels proxies /v1/models (and /v1/models/{id}) to a healthy
// decode worker.
func (rt *Router) serveModels(w http.ResponseWriter, r *http.Request) {
	d, err := rt.workers.Pick(pool.Decode, nil, nil, 0)
	if err != nil {
		rt.log.Warn("no decode worker for /v1/models", "request", requestIDOf(r.Context()), "err", err)
		httpx.WriteError(w, openai.Unavailable(pool.PublicError(err)))
		return
	}
	defer rt.workers.Release(d)
	ctx, cancel := context.WithTimeout(r.Context(), modelsTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, r.Method, d.URL()+r.URL.EscapedPath(), nil)
	if err != nil {
		httpx.WriteError(w, openai.Internal(err.Error()))
		return
	}
	resp, err := rt.probeClient.Do(req)
	if err != nil {
		le := &legError{leg: pool.Decode, worker: d.URL(), kind: kindUnreachable, cause: err}
		rt.log.Warn("models request failed", "request", requestIDOf(r.Context()), "worker", d.URL(), "err", le)
		httpx.WriteError(w, le.clientError())
		return
	}
	defer resp.Body.Close()
	body, err := httpx.ReadAllMax(resp.Body, modelsBodyBytesMax)
	if err != nil {
		le := &legError{leg: pool.Decode, worker: d.URL(), kind: kindStream, cause: err}
		rt.log.Warn("models request failed", "request", requestIDOf(r.Context()), "worker", d.URL(), "err", le)
		httpx.WriteError(w, le.clientError())
		return
	}
	if ct := resp.Header.Get("Content-Type"); ct != "" {
		w.Header().Set("Content-Type", ct)
	}
	w.WriteHeader(resp.StatusCode)
	w.Write(body)
}

// serveRooms answers the router's own room table; ?room=ID keeps only
// the rooms with that room or request id (the dashboard links to it).
func (rt *Router) serveRooms(w http.ResponseWriter, r *http.Request) {
	doc := rt.roomsDoc()
	if id := r.URL.Query().Get("room"); id != "" {
		var keep []debugdoc.Room
		for _, rm := range doc.Rooms {
			if rm.ID == id || rm.RequestID == id {
				keep = append(keep, rm)
			}
		}
		doc.Rooms = keep
	}
	httpx.WriteJSON(w, http.StatusOK, doc)
}

func (rt *Router) roomsDoc() debugdoc.Rooms {
	doc := debugdoc.Rooms{Worker: rt.o.Name, Role: "router", Rooms: rt.recs.snapshot(), Workers: rt.workers.Debug(), Membership: rt.membershipDoc()}
	for _, r := range doc.Rooms {
		if !r.Terminal() {
			doc.Live++
		}
	}
	return doc
}

// serveCluster answers the router's table and every worker's
// GET /debug/rooms (fetched concurrently, the query passed on) as one
// document. A worker that does not answer gets an entry with its error.
func (rt *Router) serveCluster(w http.ResponseWriter, r *http.Request) {
	ws := rt.workers.Workers()
	docs := make([]json.RawMessage, len(ws)+1)
	own, err := json.Marshal(rt.roomsDoc())
	if err != nil {
		httpx.WriteError(w, openai.Internal("could not encode the room table"))
		return
	}
	docs[0] = own
	var wg sync.WaitGroup
	for i, wk := range ws {
		wg.Go(func() { docs[i+1] = rt.fetchRooms(r.Context(), wk, r.URL.RawQuery) })
	}
	wg.Wait()
	var b strings.Builder
	b.WriteString(`{"processes":[`)
	for i, d := range docs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(d)
	}
	b.WriteString("]}\n")
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, b.String())
}

// fetchRooms returns one worker's /debug/rooms document with its URL as
// "worker" (and its configured role, if it gave none), or a document
// holding the error.
func (rt *Router) fetchRooms(ctx context.Context, wk *pool.Worker, query string) json.RawMessage {
	u := wk.URL() + "/debug/rooms"
	if query != "" {
		u += "?" + query
	}
	errDoc := func(err error) json.RawMessage {
		b, _ := json.Marshal(debugdoc.Rooms{Worker: wk.URL(), Role: string(wk.Role()), Error: err.Error(), Rooms: []debugdoc.Room{}})
		return b
	}
	ctx, cancel := context.WithTimeout(ctx, debugFetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return errDoc(err)
	}
	resp, err := rt.probeClient.Do(req)
	if err != nil {
		return errDoc(fmt.Errorf("get %s: %w", u, err))
	}
	defer resp.Body.Close()
	body, err := httpx.ReadAllMax(resp.Body, debugBodyBytesMax)
	if err != nil {
		return errDoc(fmt.Errorf("get %s: %w", u, err))
	}
	if resp.StatusCode != http.StatusOK {
		return errDoc(fmt.Errorf("get %s: status %d: %s", u, resp.StatusCode, httpx.Clip(string(body), 200)))
	}
	obj, err := answer.ParseObject(body)
	if err != nil {
		return errDoc(fmt.Errorf("get %s: %w", u, err))
	}
	if _, ok := obj.Get("worker"); !ok { // workers do not name themselves: the router knows them by URL
		obj = append(answer.Object{{Key: "worker", Val: answer.Quote(wk.URL())}}, obj.Del("worker")...)
	}
	if _, ok := obj.Get("role"); !ok {
		obj = obj.Set("role", answer.Quote(string(wk.Role())))
	}
	return obj.Marshal()
}

// readBody reads a request body within MaxBodyBytes and BodyTimeout.
func (rt *Router) readBody(w http.ResponseWriter, r *http.Request) ([]byte, *openai.Error) {
	return httpx.ReadBody(w, r, rt.o.MaxBodyBytes, rt.o.BodyTimeout)
}
