package collector

import (
	"context"
	"log"
	"log/slog"
	"strings"
)

// httpErrorLog is the HTTP server's error log, into the collector's: a
// failed TLS handshake (a scanner, a client without the CA or the client
// certificate) at debug level, anything else at warn.
func httpErrorLog(l *slog.Logger) *log.Logger {
	return log.New(httpLogWriter{l}, "", 0)
}

type httpLogWriter struct{ l *slog.Logger }

func (w httpLogWriter) Write(p []byte) (int, error) {
	msg := strings.TrimSpace(string(p))
	level := slog.LevelWarn
	if strings.Contains(msg, "TLS handshake error") {
		level = slog.LevelDebug
	}
	w.l.Log(context.Background(), level, "http server", "err", msg)
	return len(p), nil
}
