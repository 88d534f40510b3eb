package agent

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/MicahParks/keyfunc/v3"
	"github.com/golang-jwt/jwt/v5"
	"golang.org/x/time/rate"

	"github.com/qtop-dev/qtop/tenant"
)

// Defaults of the JWT options.
const (
	// DefaultJWKSRefresh is how often FromJWKS fetches the key set in the
	// background.
	DefaultJWKSRefresh = time.Hour
	// DefaultJWKSUnknownKID is the least time between two fetches caused
	// by tokens naming a key the set does not hold (a rotation); tokens
	// naming an unknown key in between are refused at once.
	DefaultJWKSUnknownKID = 5 * time.Minute
	// MaxJWKSBytes bounds the key set's response.
	MaxJWKSBytes = 1 << 20
	// jwksTimeout bounds one fetch of the key set.
	jwksTimeout = 10 * time.Second
)

// A JWTOption configures FromJWTWith and FromJWKS.
type JWTOption func(*jwtConfig)

type jwtConfig struct {
	hmac                   []byte
	keys                   map[string]crypto.PublicKey // by kid ("" : any)
	tenantClaim, tierClaim string
	audience, issuer       string
	requireExp             bool
	leeway                 time.Duration
	now                    func() time.Time
	refresh, unknownKID    time.Duration
	client                 *http.Client
	log                    *slog.Logger
}

// WithHMACKey accepts HS256 tokens signed with key.
func WithHMACKey(key []byte) JWTOption { return func(c *jwtConfig) { c.hmac = key } }

// WithPublicKey accepts tokens signed by the private half of key: RS256
// for an *rsa.PublicKey, ES256 for an *ecdsa.PublicKey (P-256), EdDSA for
// an ed25519.PublicKey. kid, when not empty, must match the token's
// header; several keys with their kids allow a rotation.
func WithPublicKey(kid string, key crypto.PublicKey) JWTOption {
	return func(c *jwtConfig) {
		if c.keys == nil {
			c.keys = make(map[string]crypto.PublicKey)
		}
		c.keys[kid] = key
	}
}

// WithClaims names the string claims of the tenant (default "tenant")
// and, when tier is not empty, the tier (T0 … T3).
func WithClaims(tenantClaim, tierClaim string) JWTOption {
	return func(c *jwtConfig) { c.tenantClaim, c.tierClaim = tenantClaim, tierClaim }
}

// WithAudience requires aud to name audience.
func WithAudience(audience string) JWTOption { return func(c *jwtConfig) { c.audience = audience } }

// WithIssuer requires iss to be issuer.
func WithIssuer(issuer string) JWTOption { return func(c *jwtConfig) { c.issuer = issuer } }

// WithExpirationRequired refuses tokens without an exp claim (by default
// exp is checked when present): a token that never expires stays good
// for whoever holds a copy of it.
func WithExpirationRequired() JWTOption { return func(c *jwtConfig) { c.requireExp = true } }

// WithLeeway tolerates clocks apart by d on exp and nbf (default 0).
func WithLeeway(d time.Duration) JWTOption { return func(c *jwtConfig) { c.leeway = d } }

// WithJWTClock sets the clock against which exp and nbf are checked
// (default time.Now).
func WithJWTClock(now func() time.Time) JWTOption { return func(c *jwtConfig) { c.now = now } }

// WithJWKSRefresh sets how often FromJWKS fetches the set in the
// background (default DefaultJWKSRefresh) and the least time between
// fetches caused by unknown kids (default DefaultJWKSUnknownKID).
func WithJWKSRefresh(every, unknownKID time.Duration) JWTOption {
	return func(c *jwtConfig) { c.refresh, c.unknownKID = every, unknownKID }
}

// WithJWKSClient sets the HTTP client that fetches the key set (a
// private CA, a proxy); its responses are still bounded by MaxJWKSBytes.
func WithJWKSClient(hc *http.Client) JWTOption { return func(c *jwtConfig) { c.client = hc } }

// WithJWKSLogger receives the key set's failed fetches (default
// slog.Default()).
func WithJWKSLogger(l *slog.Logger) JWTOption { return func(c *jwtConfig) { c.log = l } }

func newJWTConfig(opts []JWTOption) jwtConfig {
	c := jwtConfig{tenantClaim: "tenant", now: time.Now, refresh: DefaultJWKSRefresh,
		unknownKID: DefaultJWKSUnknownKID, log: slog.Default()}
	for _, o := range opts {
		o(&c)
	}
	return c
}

// FromJWTWith reads the tenant (and tier) from the request's
// "Authorization: Bearer" JSON Web Token, verified with the keys given by
// WithHMACKey and WithPublicKey: only the algorithms of those keys are
// accepted (never "none", and a public key is never taken as an HMAC
// secret); exp and nbf are checked when present (exp required with
// WithExpirationRequired), aud and iss when asked.
// Anything else is ErrUnauthorized.
func FromJWTWith(opts ...JWTOption) (TenantFunc, error) {
	c := newJWTConfig(opts)
	var methods []string
	if c.hmac != nil {
		if len(c.hmac) == 0 {
			return nil, errors.New("agent: jwt: empty HMAC key")
		}
		methods = append(methods, "HS256")
	}
	for kid, k := range c.keys {
		alg, err := algOf(k)
		if err != nil {
			return nil, fmt.Errorf("agent: jwt: key %q: %w", kid, err)
		}
		methods = append(methods, alg)
	}
	if len(methods) == 0 {
		return nil, errors.New("agent: jwt: no key (WithHMACKey or WithPublicKey)")
	}
	return c.tenantFunc(methods, c.staticKey), nil
}

// algOf is the algorithm a public key verifies.
func algOf(k crypto.PublicKey) (string, error) {
	switch k := k.(type) {
	case *rsa.PublicKey:
		if k.N.BitLen() < 2048 {
			return "", fmt.Errorf("RSA key of %d bits, at least 2048", k.N.BitLen())
		}
		return "RS256", nil
	case *ecdsa.PublicKey:
		if k.Curve.Params().BitSize != 256 {
			return "", errors.New("ES256 needs a P-256 key")
		}
		return "ES256", nil
	case ed25519.PublicKey:
		return "EdDSA", nil
	}
	return "", fmt.Errorf("unsupported key type %T (want RSA, ECDSA P-256 or Ed25519)", k)
}

// staticKey finds the key of a token among the configured ones: the
// HMAC key for HS256 only, a public key of the token's algorithm and kid
// otherwise.
func (c *jwtConfig) staticKey(t *jwt.Token) (any, error) {
	if t.Method.Alg() == "HS256" {
		return c.hmac, nil
	}
	kid, _ := t.Header["kid"].(string)
	if k, ok := c.keys[kid]; ok {
		return k, nil
	}
	if k, ok := c.keys[""]; ok {
		return k, nil
	}
	return nil, fmt.Errorf("unknown key id %q", kid)
}

// tenantFunc verifies tokens with methods and keyOf.
func (c *jwtConfig) tenantFunc(methods []string, keyOf jwt.Keyfunc) TenantFunc {
	popts := []jwt.ParserOption{jwt.WithValidMethods(methods), jwt.WithLeeway(c.leeway),
		jwt.WithTimeFunc(c.now)}
	if c.audience != "" {
		popts = append(popts, jwt.WithAudience(c.audience))
	}
	if c.issuer != "" {
		popts = append(popts, jwt.WithIssuer(c.issuer))
	}
	if c.requireExp {
		popts = append(popts, jwt.WithExpirationRequired())
	}
	parser := jwt.NewParser(popts...)
	return func(r *http.Request) (tenant.Tags, error) {
		if len(r.Header.Values("Authorization")) > 1 {
			// Which one a server behind reads is its own choice: the
			// tenant could be taken from one token and the request
			// authorised by another (FromHeader refuses the same).
			return tenant.Tags{}, fmt.Errorf("%w: more than one Authorization header", ErrUnauthorized)
		}
		tok, ok := bearer(r.Header.Get("Authorization"))
		if !ok {
			return tenant.Tags{}, errNoToken
		}
		if len(tok) > MaxTokenBytes {
			return tenant.Tags{}, fmt.Errorf("%w: token of %d bytes, at most %d", ErrUnauthorized, len(tok), MaxTokenBytes)
		}
		claims := jwt.MapClaims{}
		if _, err := parser.ParseWithClaims(tok, claims, keyOf); err != nil {
			return tenant.Tags{}, fmt.Errorf("%w: %v", ErrUnauthorized, err)
		}
		return c.tags(claims)
	}
}

// errNoToken is a request without a bearer token: ErrUnauthorized, but
// FirstOf tries the next source for it (a token that is there and wrong
// stops the search).
var errNoToken = fmt.Errorf("%w: no bearer token", ErrUnauthorized)

// bearer returns the token of an "Authorization: Bearer" header; the
// scheme's name is case-insensitive (RFC 9110, section 11.1), so
// "bearer" is the same.
func bearer(h string) (string, bool) {
	const scheme = "Bearer "
	if len(h) <= len(scheme) || !strings.EqualFold(h[:len(scheme)], scheme) {
		return "", false
	}
	return h[len(scheme):], true
}

// tags reads the tenant and tier claims.
func (c *jwtConfig) tags(claims jwt.MapClaims) (tenant.Tags, error) {
	var t tenant.Tags
	v, ok := claims[c.tenantClaim].(string)
	if !ok || v == "" {
		return t, fmt.Errorf("%w: no string claim %q", ErrUnauthorized, c.tenantClaim)
	}
	t.Tenant = v
	if c.tierClaim != "" {
		if s, ok := claims[c.tierClaim].(string); ok && s != "" {
			var err error
			if t.Tier, err = tenant.ParseTier(s); err != nil {
				return t, err
			}
		}
	}
	return t, nil
}

// FromJWKS is FromJWTWith with the public keys of the JSON Web Key Set at
// url (an identity provider's jwks_uri), chosen by the token's kid:
// RS256, ES256 and EdDSA (symmetric keys in the set are never used). The
// set is fetched now and every WithJWKSRefresh in the background until
// ctx ends, and again (at most once per the unknown-kid interval) when a
// token names a key it does not hold — a rotation. A fetch that fails
// (unreachable, not 200, over MaxJWKSBytes, not a key set) is logged and
// the last keys are kept; a token naming a key still unknown is refused.
// An unreachable set at start is not an error: tokens are refused until
// it answers. WithHMACKey and WithPublicKey are ignored.
func FromJWKS(ctx context.Context, url string, opts ...JWTOption) (TenantFunc, error) {
	c := newJWTConfig(opts)
	if c.refresh <= 0 || c.unknownKID <= 0 {
		return nil, errors.New("agent: jwks: refresh intervals must be positive")
	}
	hc := c.client
	if hc == nil {
		hc = &http.Client{Timeout: jwksTimeout}
	}
	bounded := *hc
	bounded.Transport = limitBody{next: hc.Transport, max: MaxJWKSBytes}
	log := c.log
	kf, err := keyfunc.NewDefaultOverrideCtx(ctx, []string{url}, keyfunc.Override{
		Client:            &bounded,
		HTTPTimeout:       jwksTimeout,
		RefreshInterval:   c.refresh,
		RefreshUnknownKID: rate.NewLimiter(rate.Every(c.unknownKID), 1),
		// A request waits at most this long for the limiter (only when
		// the next fetch is allowed within it); otherwise the token is
		// refused at once.
		RateLimitWaitMax: 100 * time.Millisecond,
		RefreshErrorHandlerFunc: func(u string) func(context.Context, error) {
			return func(_ context.Context, err error) {
				log.Warn("jwks: fetch failed, keeping the last keys", "url", u, "err", err)
			}
		},
	})
	if err != nil {
		return nil, fmt.Errorf("agent: jwks: %w", err)
	}
	return c.tenantFunc([]string{"RS256", "ES256", "EdDSA"}, kf.Keyfunc), nil
}

// limitBody fails a response body longer than max.
type limitBody struct {
	next http.RoundTripper
	max  int64
}

func (l limitBody) RoundTrip(r *http.Request) (*http.Response, error) {
	next := l.next
	if next == nil {
		next = http.DefaultTransport
	}
	resp, err := next.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	if resp.ContentLength > l.max {
		resp.Body.Close()
		return nil, fmt.Errorf("jwks: response of %d bytes, at most %d", resp.ContentLength, l.max)
	}
	resp.Body = &limitedBody{rc: resp.Body, left: l.max}
	return resp, nil
}

// limitedBody reads at most left bytes, then fails.
type limitedBody struct {
	rc   io.ReadCloser
	left int64
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, fmt.Errorf("jwks: response over %d bytes", MaxJWKSBytes)
	}
	if int64(len(p)) > b.left {
		p = p[:b.left+1] // one byte more tells an exact fit from an overflow
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	if b.left < 0 {
		return 0, fmt.Errorf("jwks: response over %d bytes", MaxJWKSBytes)
	}
	return n, err
}

func (b *limitedBody) Close() error { return b.rc.Close() }
