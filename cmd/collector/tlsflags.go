package main

import (
	"flag"

	"github.com/qtop-dev/qtop/internal/collector"
	"github.com/qtop-dev/qtop/tlsfiles"
)

// tlsFlags are serve's TLS flags: the listeners' certificate, key and
// client CA, and the files with which it reaches its --peers.
type tlsFlags struct {
	cert, key, clientCA       *string
	peerCA, peerCert, peerKey *string
}

func newTLSFlags(fs *flag.FlagSet, envs *[]envFlag) *tlsFlags {
	return &tlsFlags{
		cert:     strFlag(fs, envs, "tls-cert", "QTOP_TLS_CERT_FILE", "", "PEM certificate (chain) served by the HTTP API, OTLP/HTTP and OTLP/gRPC; reloaded when the file changes. Off loopback the collector needs it (or --insecure)"),
		key:      strFlag(fs, envs, "tls-key", "QTOP_TLS_KEY_FILE", "", "PEM key of --tls-cert"),
		clientCA: strFlag(fs, envs, "tls-client-ca", "QTOP_TLS_CLIENT_CA_FILE", "", "PEM CAs whose client certificates are required on every connection (mTLS)"),
		peerCA:   strFlag(fs, envs, "peer-ca-file", tlsfiles.EnvCA, "", "PEM CAs that sign the https:// --peers' certificates (default: the system's roots)"),
		peerCert: strFlag(fs, envs, "peer-cert-file", tlsfiles.EnvCert, "", "client certificate presented to --peers that require mTLS"),
		peerKey:  strFlag(fs, envs, "peer-key-file", tlsfiles.EnvKey, "", "key of --peer-cert-file"),
	}
}

func (f *tlsFlags) apply(cfg *collector.Config) {
	cfg.TLS = tlsfiles.ServerFiles{Cert: *f.cert, Key: *f.key, ClientCA: *f.clientCA}
	cfg.PeerTLS = tlsfiles.ClientFiles{CA: *f.peerCA, Cert: *f.peerCert, Key: *f.peerKey}
}
