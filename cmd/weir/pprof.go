package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"
)

// startPprof serves Go's runtime profiles (net/http/pprof: /debug/pprof/,
// /debug/pprof/profile?seconds=N for a CPU profile, heap, goroutine, ...)
// on addr, for `weir broker --pprof-listen`. It is off unless asked for:
// the profiles show the broker's internals, and a CPU profile costs a few
// percent while it runs. It returns the address bound; stop closes the
// listener.
func startPprof(addr string, logger *slog.Logger) (bound string, stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("--pprof-listen: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("pprof endpoint stopped", "err", err)
		}
	}()
	logger.Info("pprof endpoint", "pprof", ln.Addr().String())
	return ln.Addr().String(), func() { srv.Close() }, nil
}
