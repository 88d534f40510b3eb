// Package tlsfiles builds the TLS configurations of qtop's listeners and
// clients from PEM files: a server certificate and key with an optional
// client CA (mTLS), reloaded when the files change, and a client's CA with
// an optional client certificate.
//
// A server:
//
//	cfg, err := tlsfiles.Server(tlsfiles.ServerFiles{Cert: "srv.pem", Key: "srv-key.pem", ClientCA: "ca.pem"}, logger)
//	ln = tls.NewListener(ln, cfg)
//
// The certificate, key and client CA are read again at the next handshake
// after one of the files' modification time or size changes (a
// certificate renewed by cert-manager or certbot is served without a
// restart). A reload that fails — a half-written file, a key that does
// not match — is logged and the last good pair is kept: a handshake never
// fails for it. With a client CA, every client must present a certificate
// it signed (as tls.RequireAndVerifyClientCert, the CA reloaded too). TLS 1.2 is the minimum; the
// cipher suites and curves are Go's defaults.
//
// A client reads its files from flags or, by default, from the
// environment:
//
//	QTOP_CA_FILE    PEM bundle of the CAs that sign the collector's certificate
//	                (default: the system's roots)
//	QTOP_CERT_FILE  client certificate, for a collector that requires mTLS
//	QTOP_KEY_FILE   its key
//
//	files := tlsfiles.ClientFromEnv()
//	cfg, err := files.Config()      // nil, nil when no file is named
//	client := &http.Client{Transport: files.MustTransport()}
//
// The collector's --tls-cert, --tls-key and --tls-client-ca (or
// QTOP_TLS_CERT_FILE, QTOP_TLS_KEY_FILE, QTOP_TLS_CLIENT_CA_FILE) name the
// server's files; qtop's --ca-file, --cert-file and --key-file, the
// reporter, the agent and the collector's requests to its peers use the
// client's.
package tlsfiles
