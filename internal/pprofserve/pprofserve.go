// Package pprofserve serves Go's profiles for the qtop binaries (collector --pprof,
// gate --pprof), on a loopback address only.
package pprofserve

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"
)

// Serve serves Go's profiles (net/http/pprof) on addr, a loopback
// address: they show a binary's code paths and memory, so they are
// never served to the network. It returns once listening, with the
// address it listens on and the function that stops it.
func Serve(addr string, log *slog.Logger) (string, func(), error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return "", nil, fmt.Errorf("--pprof %q: want host:port, e.g. 127.0.0.1:6060", addr)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return "", nil, fmt.Errorf("--pprof %q: profiles are served on a loopback address only (127.0.0.1, ::1 or localhost)", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("--pprof: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	log.Info("Go profiles served", "addr", "http://"+ln.Addr().String()+"/debug/pprof/")
	return ln.Addr().String(), func() { srv.Close() }, nil
}
