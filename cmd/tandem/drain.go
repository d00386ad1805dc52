package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"tandem/internal/api/drain"
)

// drainFlags are the drain flags of every serving command (serve,
// prefill, decode, route): see internal/api/drain and docs/operations.md.
type drainFlags struct {
	settle  time.Duration // --drain-settle
	timeout time.Duration // --drain-timeout
	grace   time.Duration // --shutdown-grace, the old name of --drain-timeout
}

func (d *drainFlags) register(fs *pflag.FlagSet) {
	fs.DurationVar(&d.settle, "drain-settle", drain.DefaultSettle, "after SIGTERM or SIGINT: how long /ready answers 503 while requests are still served, "+
		"so routers and load balancers notice before new requests are refused (a second signal ends it at once)")
	fs.DurationVar(&d.timeout, "drain-timeout", drain.DefaultTimeout, "after the settle window: how long the requests held may run to their end "+
		"(a prefill worker's KV sends, a decode worker's streams, a router's client streams); what is left then ends with an error")
	fs.DurationVar(&d.grace, "shutdown-grace", 0, "the old name of --drain-timeout")
	_ = fs.MarkDeprecated("shutdown-grace", "use --drain-timeout")
}

// check validates the flags and applies --shutdown-grace when it alone
// was given.
func (d *drainFlags) check(fs *pflag.FlagSet) error {
	if fs.Changed("shutdown-grace") && !fs.Changed("drain-timeout") {
		d.timeout = d.grace
	}
	if d.settle < 0 || d.timeout < 0 {
		return fmt.Errorf("--drain-settle %s and --drain-timeout %s must not be negative", d.settle, d.timeout)
	}
	return nil
}

// config is the drain of a process whose context signalCtx made.
func (d *drainFlags) config(ctx context.Context) drain.Config {
	return drain.Config{Settle: d.settle, Timeout: d.timeout, Hurry: hurryOf(ctx)}
}

// endGrace bounds the last step of a stop, after the drain: the handlers
// that were ended write their error, then the connections close.
const endGrace = 5 * time.Second

type hurryKey struct{}

// signalContext returns a context that the first SIGINT, SIGTERM or SIGHUP
// cancels (a serving command then drains), carrying a channel that the
// second one closes (hurryOf: the drain's settle window ends at once). Any
// later signal is ignored: work in flight still finishes within
// --drain-timeout.
func signalContext() context.Context {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	ctx, cancel := context.WithCancel(context.Background())
	hurry := make(chan struct{})
	go func() { // lives as long as the process
		<-sigs
		cancel()
		<-sigs
		close(hurry)
		for range sigs {
		}
	}()
	return context.WithValue(ctx, hurryKey{}, (<-chan struct{})(hurry))
}

// hurryOf returns the channel a second signal closes, or nil (never) when
// ctx is not signalContext's.
func hurryOf(ctx context.Context) <-chan struct{} {
	h, _ := ctx.Value(hurryKey{}).(<-chan struct{})
	return h
}
