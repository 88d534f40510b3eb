package collector

import (
	"context"
	"log"
	"log/slog"
	"strings"
)

// httpErrorLog is the HTTP server's error log, into the collector's: a
// failed TLS handshake (a scanner, a client without the CA or the client
// certificate) counted in tls (and logged by it at most once a minute),
// anything else at warn.
func httpErrorLog(l *slog.Logger, tls *tlsRefusals) *log.Logger {
	return log.New(httpLogWriter{l, tls}, "", 0)
}

type httpLogWriter struct {
	l   *slog.Logger
	tls *tlsRefusals
}

func (w httpLogWriter) Write(p []byte) (int, error) {
	msg := strings.TrimSpace(string(p))
	if strings.Contains(msg, "TLS handshake error") {
		w.tls.failed(msg)
		return len(p), nil
	}
	w.l.Log(context.Background(), slog.LevelWarn, "http server", "err", msg)
	return len(p), nil
}
