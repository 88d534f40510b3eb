package main

import (
	"context"
	"crypto"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/qtop-dev/qtop/agent"
)

// jwtFlags say how --tenant jwt verifies a bearer token: an HS256 key, a
// public key (RS256, ES256, EdDSA) or an identity provider's key set.
type jwtFlags struct {
	keyFile, publicKeyFile, jwksURL string
	tenantClaim, tierClaim          string
	issuer, audience                string
	leeway                          time.Duration
	requireExp                      bool
}

func (b *binder) jwtFlags(j *jwtFlags) {
	b.str(&j.keyFile, "jwt-key-file", "QTOP_GATE_JWT_KEY_FILE", "", "file holding the HS256 key of --tenant jwt")
	b.str(&j.publicKeyFile, "jwt-public-key-file", "QTOP_GATE_JWT_PUBLIC_KEY_FILE", "", "PEM file holding the public key (or certificate) that verifies --tenant jwt tokens: RS256, ES256 (P-256) or EdDSA")
	b.str(&j.jwksURL, "jwks-url", "QTOP_GATE_JWKS_URL", "", "the identity provider's JSON Web Key Set (its jwks_uri, https) that verifies --tenant jwt tokens by their kid; fetched hourly and on an unknown kid")
	b.str(&j.tenantClaim, "jwt-tenant-claim", "QTOP_GATE_JWT_TENANT_CLAIM", "tenant", "JWT claim holding the tenant")
	b.str(&j.tierClaim, "jwt-tier-claim", "QTOP_GATE_JWT_TIER_CLAIM", "tier", "JWT claim holding the tier (empty: none)")
	b.str(&j.issuer, "jwt-issuer", "QTOP_GATE_JWT_ISSUER", "", "require tokens whose iss is this (empty: not checked)")
	b.str(&j.audience, "jwt-audience", "QTOP_GATE_JWT_AUDIENCE", "", "require tokens whose aud names this (empty: not checked)")
	b.dur(&j.leeway, "jwt-leeway", "QTOP_GATE_JWT_LEEWAY", 0, "tolerate clocks apart by this much on exp and nbf")
	b.bool(&j.requireExp, "jwt-require-exp", "QTOP_GATE_JWT_REQUIRE_EXP", "refuse tokens without an exp claim (by default exp is checked when present)")
}

// jwtTenant builds --tenant jwt's extractor. The key set, if any, is
// fetched in the background until ctx ends.
func jwtTenant(ctx context.Context, j jwtFlags, log *slog.Logger) (agent.TenantFunc, error) {
	opts := []agent.JWTOption{agent.WithClaims(j.tenantClaim, j.tierClaim), agent.WithLeeway(j.leeway)}
	if j.issuer != "" {
		opts = append(opts, agent.WithIssuer(j.issuer))
	}
	if j.audience != "" {
		opts = append(opts, agent.WithAudience(j.audience))
	}
	if j.requireExp {
		opts = append(opts, agent.WithExpirationRequired())
	}
	if j.jwksURL != "" {
		if j.keyFile != "" || j.publicKeyFile != "" {
			return nil, errors.New("--jwks-url takes the keys from the key set: leave out --jwt-key-file and --jwt-public-key-file")
		}
		if err := checkJWKSURL(j.jwksURL); err != nil {
			return nil, err
		}
		return agent.FromJWKS(ctx, j.jwksURL, append(opts, agent.WithJWKSLogger(log))...)
	}
	if j.keyFile == "" && j.publicKeyFile == "" {
		return nil, errors.New("--tenant jwt needs --jwt-key-file (HS256), --jwt-public-key-file or --jwks-url")
	}
	if j.keyFile != "" {
		key, err := os.ReadFile(j.keyFile)
		if err != nil {
			return nil, fmt.Errorf("--jwt-key-file: %w", err)
		}
		opts = append(opts, agent.WithHMACKey([]byte(strings.TrimSpace(string(key)))))
	}
	if j.publicKeyFile != "" {
		key, err := readPublicKey(j.publicKeyFile)
		if err != nil {
			return nil, fmt.Errorf("--jwt-public-key-file: %w", err)
		}
		opts = append(opts, agent.WithPublicKey("", key))
	}
	tf, err := agent.FromJWTWith(opts...)
	if err != nil {
		return nil, fmt.Errorf("--tenant jwt: %w", err)
	}
	return tf, nil
}

// checkJWKSURL wants https, or http on a loopback address: keys fetched
// over plain HTTP from elsewhere could be anyone's.
func checkJWKSURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" {
		return fmt.Errorf("--jwks-url %q: want https://host/path", s)
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		if ip := net.ParseIP(u.Hostname()); (ip != nil && ip.IsLoopback()) || u.Hostname() == "localhost" {
			return nil
		}
	}
	return fmt.Errorf("--jwks-url %q: want https (plain http only on loopback: keys fetched in the clear could be forged)", s)
}

// readPublicKey reads one PEM public key (PKIX "PUBLIC KEY", or the key
// of a "CERTIFICATE").
func readPublicKey(path string) (crypto.PublicKey, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	blk, rest := pem.Decode(b)
	if blk == nil {
		return nil, errors.New("no PEM block: want a PUBLIC KEY or CERTIFICATE")
	}
	if next, _ := pem.Decode(rest); next != nil {
		return nil, errors.New("more than one PEM block: give one key (for several keys and rotation, serve a key set and use --jwks-url)")
	}
	switch blk.Type {
	case "PUBLIC KEY":
		return x509.ParsePKIXPublicKey(blk.Bytes)
	case "CERTIFICATE":
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return nil, err
		}
		return c.PublicKey, nil
	}
	return nil, fmt.Errorf("PEM block %q: want PUBLIC KEY or CERTIFICATE", blk.Type)
}
