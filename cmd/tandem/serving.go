package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"

	"tandem/internal/server"
)

// httpServing is a worker's HTTP server (serve, prefill, decode, for
// generation and embedding models alike), listening and ready.
type httpServing struct {
	hs   *http.Server
	addr string // the address it listens on (the port chosen when --port is 0)
	errc chan error
}

// serveHTTP listens on host:port, serves srv there and marks it ready.
func serveHTTP(srv *server.Server, host string, port int) (*httpServing, error) {
	hs := srv.HTTPServer(net.JoinHostPort(host, strconv.Itoa(port)))
	ln, err := net.Listen("tcp", hs.Addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", hs.Addr, err)
	}
	s := &httpServing{hs: hs, addr: ln.Addr().String(), errc: make(chan error, 1)}
	go func() { s.errc <- hs.Serve(ln) }()
	srv.SetReady(true)
	return s, nil
}

// wait returns nil when ctx is done (the drain comes next), or the
// server's error if it stopped serving first.
func (s *httpServing) wait(ctx context.Context) error {
	select {
	case err := <-s.errc:
		return fmt.Errorf("serve http: %w", err)
	case <-ctx.Done():
		return nil
	}
}

// stop ends the server after the drain: its handlers get endGrace to
// return, then what is still open is closed. It returns the server's own
// error, if any.
func (s *httpServing) stop(log *slog.Logger) error {
	sctx, cancel := context.WithTimeout(context.Background(), endGrace)
	defer cancel()
	if err := s.hs.Shutdown(sctx); err != nil {
		log.Warn("connections still open after the drain; closing them", "err", err)
		s.hs.Close()
	}
	if err := <-s.errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve http: %w", err)
	}
	return nil
}
