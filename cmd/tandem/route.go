package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"

	"github.com/spf13/cobra"

	"tandem/internal/api/leg"
	"tandem/internal/discovery"
	"tandem/internal/router"
)

func routeCmd() *cobra.Command {
	var (
		o         router.Options
		host      string
		port      int
		listenFD  int
		df        drainFlags
		obs       obsFlags
		tokenFile string
		disc      discovery.Config
	)
	cmd := &cobra.Command{
		Use:   "route (--prefill URL... --decode URL... | --discovery k8s|dns:NAME[:PORT]|file:PATH) [--port 8000]",
		Short: "Front prefill and decode workers with one OpenAI-compatible endpoint",
		Long: `Route takes OpenAI requests (POST /v1/completions, POST /v1/chat/completions,
streaming included) and sends each to a prefill and a decode worker at once,
under a fresh room id, then streams the decode worker's answer back. With n > 1
each choice is its own prefill/decode pair. Workers are picked among the healthy
ones (GET /ready every --health-interval) by the load they report
(GET /pd/status) plus the legs the router has open on them.

Selective disaggregation: a prompt under --pd-threshold tokens (counted by its
bytes, or by a decode worker's /tokenize when that is not enough) skips the
prefill workers and runs as one local leg on a decode worker, which prefills it
in its own batch; so does every request while no prefill worker is healthy.
--pd-threshold 0 disaggregates every request.

Workers come from --prefill and --decode (a static fleet) or, with
--discovery, from a source that changes while the router runs: k8s (the pods
of --discovery-namespace matching --discovery-selector, role from the label
llm-d.ai/role, Ready while the pod is Ready and not terminating), dns:NAME[:PORT]
(a headless Service's addresses, role from each worker's /pd/info) or
file:PATH (llm-d's endpoint list, YAML or JSON, reloaded when it changes). A
worker that joins is probed at once and takes legs as soon as it answers; one
that leaves, or stops being Ready, gets no new legs while its legs finish.
/debug/cluster and tandem inspect show each worker's source, since and
readiness (see docs/operations.md).

A failed leg cancels the other; the client gets one error naming the leg (the
worker's address goes to the log, not to the client). Besides the API it serves
GET /health (liveness), /ready (readiness: not draining, and workers to send
to), /metrics (Prometheus), /debug/rooms (its own request records) and
/debug/cluster (its records and every worker's room table, for ` + "`tandem inspect`" + `).
Every answer names the router in X-Tandem-Router (--name).

Workers are probed on GET /ready: one that answers 503 "draining", or
answers a leg with the draining answer (503, code "draining"), gets no new
legs while its legs finish, and a sample it refused goes to another worker
before anything reaches the client. SIGINT or SIGTERM drains the router
itself: /ready answers 503 at once, requests are served for --drain-settle
(answers carry Connection: close), then it stops accepting on --listen-fd
(other routers sharing that socket take its connections) and refuses new
requests on its own port with the draining answer, while its streams have
--drain-timeout to finish (see docs/operations.md).

With --api-key (or $TANDEM_API_KEY) every /v1/ request needs
"Authorization: Bearer KEY". --allowed-origins turns on CORS for those browser
origins. A client's X-Request-Id (up to 128 printable characters) is adopted as
the request id, or one is minted; either way it is echoed on the answer, sent to
both workers and written in every log line and /debug/rooms entry.

/debug/* needs the cluster credential. The router signs every leg with a key
derived from the cluster token ($TANDEM_CLUSTER_TOKEN or --cluster-token-file),
which it needs: the workers refuse unsigned requests.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := obs.logger()
			if err != nil {
				return err
			}
			o.Logger = log
			tracing, stopTracing, err := obs.tracing(cmd.Context(), log, "router", o.Name)
			if err != nil {
				return err
			}
			defer stopTracing()
			o.Tracing = tracing
			if o.APIKey == "" {
				o.APIKey = os.Getenv("TANDEM_API_KEY")
			}
			tok, err := clusterToken(tokenFile)
			if err != nil {
				return err
			}
			if o.LegKeys, err = leg.NewKeys(tok); err != nil {
				return err
			}
			if err := df.check(cmd.Flags()); err != nil {
				return err
			}
			if kind, _, err := discovery.ParseSpec(disc.Spec); err != nil {
				return err
			} else if kind != discovery.KindStatic {
				o.Discovery = &disc
			} else if len(o.Prefill) == 0 || len(o.Decode) == 0 {
				return errors.New("route: give the workers: --prefill URL and --decode URL (at least one of each), or --discovery k8s|dns:NAME[:PORT]|file:PATH")
			}
			lns, shared, err := routerListeners(host, port, listenFD, cmd.Flags().Changed("port"))
			if err != nil {
				return err
			}
			rt, err := router.New(o)
			if err != nil {
				for _, ln := range lns {
					ln.Close()
				}
				return err
			}
			return serveRouter(cmd.Context(), rt, log, lns, shared, &df)
		},
	}
	fs := cmd.Flags()
	fs.StringSliceVar(&o.Prefill, "prefill", nil, "prefill worker base URL (repeat or comma-separate for several)")
	fs.StringSliceVar(&o.Decode, "decode", nil, "decode worker base URL (repeat or comma-separate for several)")
	fs.StringVar(&host, "host", "127.0.0.1", "address to listen on (0.0.0.0: all interfaces)")
	fs.IntVar(&port, "port", 8000, "TCP port to listen on (0: any free port)")
	fs.DurationVar(&o.HealthInterval, "health-interval", router.DefaultHealthInterval, "time between health checks of every worker")
	fs.DurationVar(&o.HealthTimeout, "health-timeout", router.DefaultHealthTimeout, "limit for each health check")
	fs.DurationVar(&o.LegTimeout, "leg-timeout", router.DefaultLegTimeout,
		"longest a worker may send nothing on a leg (for a non-streamed leg, as prefill's, the whole leg)")
	fs.DurationVar(&o.RequestTimeout, "request-timeout", router.DefaultRequestTimeout, "limit for a whole request")
	fs.Int64Var(&o.MaxBodyBytes, "max-body-bytes", router.DefaultMaxBodyBytes, "largest request body accepted (413 above it)")
	fs.IntVar(&o.MaxRequests, "max-requests", router.DefaultMaxRequests, "requests in flight before new ones get 429")
	fs.IntVar(&o.FinishedRecords, "debug-records", router.DefaultFinishedRecords, "finished requests /debug/rooms keeps")
	fs.IntVar(&o.BreakerFailures, "breaker-failures", router.DefaultBreakerFailures,
		"consecutive failed legs that open a worker's circuit breaker (no legs until a probe leg succeeds)")
	fs.DurationVar(&o.BreakerCooldown, "breaker-cooldown", router.DefaultBreakerCooldown,
		"how long an open circuit breaker keeps a worker out before one probe leg is let through")
	fs.IntVar(&o.PDThreshold, "pd-threshold", router.DefaultPDThreshold, pdThresholdUsage)
	fs.Float64Var(&o.PDSpill, "pd-spill", router.DefaultPDSpill, pdSpillUsage)
	fs.StringVar(&o.APIKey, "api-key", "", "require \"Authorization: Bearer KEY\" on /v1/* (401 otherwise); default $TANDEM_API_KEY; /health, /ready and /metrics stay open")
	fs.StringSliceVar(&o.AllowedOrigins, "allowed-origins", nil, "browser origins (scheme://host[:port], or *) that get CORS headers and preflight answers; default none")
	fs.IntVar(&listenFD, "listen-fd", -1, "also serve the listening TCP socket this process inherited as file descriptor N (systemd socket activation's "+
		"style; tandem up gives every router the same one): several routers accept from one queue, and one that drains stops accepting while the others go on; "+
		"without an explicit --port, this socket is the only listener")
	fs.StringVar(&o.Name, "name", "router", "this router's name: in its X-Tandem-Router answer header, its /debug/rooms and its log")
	df.register(fs)
	obs.register(fs, false)
	fs.StringVar(&tokenFile, "cluster-token-file", "", "file holding the workers' cluster token, which signs legs (default: $TANDEM_CLUSTER_TOKEN)")
	disc.AddFlags(fs)
	return cmd
}

// pdThresholdUsage is the help of --pd-threshold (route and up).
const pdThresholdUsage = "selective disaggregation: prompts under this many tokens run as one local leg on a decode worker " +
	"(which prefills them itself); longer ones go to a prefill worker; 0 disaggregates every request"

// pdSpillUsage is the help of --pd-spill (route and up).
const pdSpillUsage = "a long prompt prefills on a decode worker (within its --itl-target) instead of a prefill worker when the prefill " +
	"worker's queued prefill tokens, the prompt included, are at least this many times the decode worker's; 0: never"

// routerListeners opens the router's listeners: its own on host:port
// (unless listenFD is given and the port was not), and the inherited
// socket at listenFD (shared, nil when there is none).
func routerListeners(host string, port, listenFD int, portGiven bool) (lns []net.Listener, shared net.Listener, err error) {
	if listenFD >= 0 {
		f := os.NewFile(uintptr(listenFD), "listen-fd")
		if f == nil {
			return nil, nil, fmt.Errorf("--listen-fd %d is not an open file descriptor", listenFD)
		}
		shared, err = net.FileListener(f) // a duplicate: f is no longer needed
		f.Close()
		if err != nil {
			return nil, nil, fmt.Errorf("--listen-fd %d is not a listening socket: %w", listenFD, err)
		}
		lns = append(lns, shared)
	}
	if listenFD < 0 || portGiven {
		addr := net.JoinHostPort(host, strconv.Itoa(port))
		own, err := net.Listen("tcp", addr)
		if err != nil {
			if shared != nil {
				shared.Close()
			}
			return nil, nil, fmt.Errorf("listen on %s: %w", addr, err)
		}
		lns = append(lns, own)
	}
	return lns, shared, nil
}

// serveRouter runs the router's health checks and HTTP server on lns until
// ctx ends, then drains (package drain): /ready 503 and requests still
// served for --drain-settle; then the shared listener (if any) closes, so
// the other routers on that socket take its connections, and new requests
// on its own listener get the draining answer, while the requests held
// have --drain-timeout; what is left is ended with an error.
func serveRouter(ctx context.Context, rt *router.Router, log *slog.Logger, lns []net.Listener, shared net.Listener, df *drainFlags) error {
	srv := rt.HTTPServer("")
	// Membership and health run until the process stops, drain included:
	// workers that join or leave while it drains are still followed.
	hctx, stopHealth := context.WithCancel(context.Background())
	discErr := make(chan error, 1)
	go func() { discErr <- rt.RunDiscovery(hctx) }() // ends when stopHealth is called, below
	select {
	case <-rt.Synced():
	case err := <-discErr:
		stopHealth()
		rt.Close()
		return err
	case <-ctx.Done():
		stopHealth()
		<-discErr
		rt.Close()
		return nil
	}
	rt.CheckNow(ctx) // a first round before serving, so that healthy workers take requests at once
	healthDone := make(chan struct{})
	go func() { // ends when stopHealth is called, below
		defer close(healthDone)
		rt.Run(hctx)
	}()
	defer func() {
		stopHealth()
		<-healthDone
		<-discErr
		rt.Close()
	}()
	serveErr := make(chan error, len(lns))
	for _, ln := range lns {
		go func() { serveErr <- srv.Serve(ln) }() // ends when its listener closes, below
		log.Info("router listening", "addr", ln.Addr().String(), "shared", ln == shared)
	}
	select {
	case err := <-serveErr:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	dc := df.config(ctx)
	dc.Logger = log
	dc.Refusing = func() {
		if shared != nil {
			shared.Close() // this process's share: the socket stays open in the others'
		}
		srv.SetKeepAlivesEnabled(false) // idle connections close now, busy ones after their answer
	}
	res := rt.Gate().Drain(dc)
	if res.Left > 0 {
		rt.EndRequests() // their clients get an error; their legs are cancelled, so the workers end the rooms
	}
	sctx, cancel := context.WithTimeout(context.Background(), endGrace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		log.Warn("connections still open after the drain; closing them", "err", err)
		srv.Close()
	}
	for range lns {
		if err := <-serveErr; err != nil && !errors.Is(err, http.ErrServerClosed) && !errors.Is(err, net.ErrClosed) {
			return fmt.Errorf("serve: %w", err)
		}
	}
	log.Info("stopped", "settled", res.Settled, "drained", res.Drained, "ended_at_deadline", res.Left)
	return nil
}
