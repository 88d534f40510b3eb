package agent

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"log/slog"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

var jwtNow = time.Unix(1_800_000_000, 0)

type jwtKeys struct {
	rsa *rsa.PrivateKey
	ec  *ecdsa.PrivateKey
	ed  ed25519.PrivateKey
}

func newJWTKeys(t *testing.T) jwtKeys {
	t.Helper()
	rk, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ek, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	_, dk, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return jwtKeys{rk, ek, dk}
}

// sign makes "Bearer <token>" with claims, the method, the kid and key.
func sign(t *testing.T, m jwt.SigningMethod, kid string, key any, claims jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(m, claims)
	if kid != "" {
		tok.Header["kid"] = kid
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return "Bearer " + s
}

func claims(extra ...any) jwt.MapClaims {
	c := jwt.MapClaims{"org": "acme", "tier": "T1", "aud": "api", "iss": "https://id.example",
		"exp": jwtNow.Add(time.Minute).Unix(), "nbf": jwtNow.Add(-time.Minute).Unix()}
	for i := 0; i+1 < len(extra); i += 2 {
		c[extra[i].(string)] = extra[i+1]
	}
	return c
}

func call(f TenantFunc, auth string) (string, error) {
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("Authorization", auth)
	t, err := f(r)
	return t.Tenant, err
}

// TestFromJWTWith: every algorithm with a real key; time, audience and
// issuer checks; alg none, key confusion and unknown kids refused.
func TestFromJWTWith(t *testing.T) {
	k := newJWTKeys(t)
	hmacKey := []byte("a shared secret of some length")
	f, err := FromJWTWith(WithHMACKey(hmacKey), WithPublicKey("r1", &k.rsa.PublicKey), WithPublicKey("e1", &k.ec.PublicKey),
		WithPublicKey("d1", k.ed.Public()), WithClaims("org", "tier"), WithAudience("api"), WithIssuer("https://id.example"),
		WithLeeway(30*time.Second), WithJWTClock(func() time.Time { return jwtNow }))
	if err != nil {
		t.Fatal(err)
	}
	pubDER, _ := x509.MarshalPKIXPublicKey(&k.rsa.PublicKey)
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER})
	none, err := jwt.NewWithClaims(jwt.SigningMethodNone, claims()).SignedString(jwt.UnsafeAllowNoneSignatureType)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, auth string
		ok         bool
	}{
		{"HS256", sign(t, jwt.SigningMethodHS256, "", hmacKey, claims()), true},
		{"RS256", sign(t, jwt.SigningMethodRS256, "r1", k.rsa, claims()), true},
		{"ES256", sign(t, jwt.SigningMethodES256, "e1", k.ec, claims()), true},
		{"EdDSA", sign(t, jwt.SigningMethodEdDSA, "d1", k.ed, claims()), true},
		{"expired", sign(t, jwt.SigningMethodRS256, "r1", k.rsa, claims("exp", jwtNow.Add(-time.Minute).Unix())), false},
		{"expired within leeway", sign(t, jwt.SigningMethodRS256, "r1", k.rsa, claims("exp", jwtNow.Add(-10*time.Second).Unix())), true},
		{"not yet valid", sign(t, jwt.SigningMethodES256, "e1", k.ec, claims("nbf", jwtNow.Add(time.Minute).Unix())), false},
		{"wrong audience", sign(t, jwt.SigningMethodRS256, "r1", k.rsa, claims("aud", "other")), false},
		{"no audience", sign(t, jwt.SigningMethodRS256, "r1", k.rsa, claims("aud", nil)), false},
		{"wrong issuer", sign(t, jwt.SigningMethodEdDSA, "d1", k.ed, claims("iss", "https://evil.example")), false},
		{"alg none", "Bearer " + none, false},
		{"RSA public key (PEM) as HMAC secret", sign(t, jwt.SigningMethodHS256, "r1", pubPEM, claims()), false},
		{"RSA public key (DER) as HMAC secret", sign(t, jwt.SigningMethodHS256, "r1", pubDER, claims()), false},
		{"RS256 under the EC key's kid", sign(t, jwt.SigningMethodRS256, "e1", k.rsa, claims()), false},
		{"unknown kid", sign(t, jwt.SigningMethodRS256, "r9", k.rsa, claims()), false},
		{"HS384 with the right secret", sign(t, jwt.SigningMethodHS384, "", hmacKey, claims()), false},
		{"no tenant claim", sign(t, jwt.SigningMethodRS256, "r1", k.rsa, claims("org", nil)), false},
	} {
		got, err := call(f, c.auth)
		if c.ok != (err == nil) || (err != nil && !errors.Is(err, ErrUnauthorized)) || (c.ok && got != "acme") {
			t.Errorf("%s: %q, %v", c.name, got, err)
		}
	}
	// WithExpirationRequired refuses a token without exp; by default it
	// passes.
	strict, err := FromJWTWith(WithHMACKey(hmacKey), WithClaims("org", ""), WithExpirationRequired(),
		WithJWTClock(func() time.Time { return jwtNow }))
	if err != nil {
		t.Fatal(err)
	}
	without := claims()
	delete(without, "exp")
	noExp := sign(t, jwt.SigningMethodHS256, "", hmacKey, without)
	if _, err := call(strict, noExp); !errors.Is(err, ErrUnauthorized) {
		t.Errorf("no exp, required: %v", err)
	}
	if got, err := call(strict, sign(t, jwt.SigningMethodHS256, "", hmacKey, claims())); err != nil || got != "acme" {
		t.Errorf("exp, required: %q %v", got, err)
	}
	lax, _ := FromJWTWith(WithHMACKey(hmacKey), WithClaims("org", ""), WithJWTClock(func() time.Time { return jwtNow }))
	if _, err := call(lax, noExp); err != nil {
		t.Errorf("no exp, not required: %v", err)
	}
	// An HMAC-only configuration refuses RS256 whatever the key.
	hs, _ := FromJWTWith(WithHMACKey(pubPEM), WithClaims("org", ""), WithJWTClock(func() time.Time { return jwtNow }))
	if _, err := call(hs, sign(t, jwt.SigningMethodRS256, "", k.rsa, claims())); !errors.Is(err, ErrUnauthorized) {
		t.Errorf("RS256 against an HMAC key: %v", err)
	}
	if _, err := FromJWTWith(WithClaims("org", "")); err == nil {
		t.Error("no key accepted")
	}
	small, _ := rsa.GenerateKey(rand.Reader, 1024)
	if _, err := FromJWTWith(WithPublicKey("", &small.PublicKey)); err == nil {
		t.Error("a 1024-bit RSA key accepted")
	}
}

// jwks is a JSON Web Key Set served by httptest, whose keys the test
// changes, counting the fetches.
type jwks struct {
	mu      sync.Mutex
	body    []byte
	fetches atomic.Int64
	srv     *httptest.Server
}

func newJWKS(t *testing.T) *jwks {
	j := &jwks{}
	j.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		j.fetches.Add(1)
		j.mu.Lock()
		defer j.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Write(j.body)
	}))
	t.Cleanup(j.srv.Close)
	return j
}

func (j *jwks) set(t *testing.T, keys ...map[string]string) {
	b, err := json.Marshal(map[string]any{"keys": keys})
	if err != nil {
		t.Fatal(err)
	}
	j.mu.Lock()
	j.body = b
	j.mu.Unlock()
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

func rsaJWK(kid string, k *rsa.PublicKey) map[string]string {
	return map[string]string{"kty": "RSA", "kid": kid, "alg": "RS256", "use": "sig", "n": b64(k.N.Bytes()),
		"e": b64(big.NewInt(int64(k.E)).Bytes())}
}

func ecJWK(kid string, k *ecdsa.PublicKey) map[string]string {
	b, _ := k.Bytes() // 0x04 || X || Y
	return map[string]string{"kty": "EC", "kid": kid, "crv": "P-256", "alg": "ES256", "x": b64(b[1:33]), "y": b64(b[33:])}
}

func edJWK(kid string, k ed25519.PublicKey) map[string]string {
	return map[string]string{"kty": "OKP", "kid": kid, "crv": "Ed25519", "alg": "EdDSA", "x": b64(k)}
}

// TestFromJWKS: keys chosen by kid from a served set; a rotation is
// fetched on the first token naming the new key; an unknown kid after
// that is refused without another fetch; an unreachable set keeps the
// last keys; a symmetric key in the set is never used.
func TestFromJWKS(t *testing.T) {
	k, k2 := newJWTKeys(t), newJWTKeys(t)
	j := newJWKS(t)
	secret := []byte("a symmetric key published by mistake")
	j.set(t, rsaJWK("r1", &k.rsa.PublicKey), ecJWK("e1", &k.ec.PublicKey), edJWK("d1", k.ed.Public().(ed25519.PublicKey)),
		map[string]string{"kty": "oct", "kid": "s1", "k": b64(secret)})
	var logs bytes.Buffer
	f, err := FromJWKS(t.Context(), j.srv.URL, WithClaims("org", "tier"), WithAudience("api"),
		WithJWTClock(func() time.Time { return jwtNow }), WithJWKSLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	if err != nil {
		t.Fatal(err)
	}
	ok := func(name, auth string, want bool) {
		t.Helper()
		if got, err := call(f, auth); want != (err == nil) || (want && got != "acme") {
			t.Errorf("%s: %q, %v", name, got, err)
		}
	}
	ok("RS256", sign(t, jwt.SigningMethodRS256, "r1", k.rsa, claims()), true)
	ok("ES256", sign(t, jwt.SigningMethodES256, "e1", k.ec, claims()), true)
	ok("EdDSA", sign(t, jwt.SigningMethodEdDSA, "d1", k.ed, claims()), true)
	ok("HS256 with the set's symmetric key", sign(t, jwt.SigningMethodHS256, "s1", secret, claims()), false)
	ok("expired", sign(t, jwt.SigningMethodRS256, "r1", k.rsa, claims("exp", jwtNow.Add(-time.Second).Unix())), false)
	ok("wrong audience", sign(t, jwt.SigningMethodRS256, "r1", k.rsa, claims("aud", "other")), false)
	ok("signed by another key under a known kid", sign(t, jwt.SigningMethodRS256, "r1", k2.rsa, claims()), false)
	if n := j.fetches.Load(); n != 1 {
		t.Fatalf("%d fetches before the rotation, want 1", n)
	}

	// Rotation: the provider replaces r1 by r2.
	j.set(t, rsaJWK("r2", &k2.rsa.PublicKey))
	ok("RS256 under the new kid", sign(t, jwt.SigningMethodRS256, "r2", k2.rsa, claims()), true)
	ok("the retired key", sign(t, jwt.SigningMethodRS256, "r1", k.rsa, claims()), false)
	ok("an unknown kid", sign(t, jwt.SigningMethodRS256, "r3", k2.rsa, claims()), false)
	if n := j.fetches.Load(); n != 2 {
		t.Fatalf("%d fetches after the rotation, want 2 (one for r2; r1 and r3 refused without fetching)", n)
	}

	// The provider becomes unreachable: the last keys still verify.
	j.srv.Close()
	ok("RS256 with the set unreachable", sign(t, jwt.SigningMethodRS256, "r2", k2.rsa, claims()), true)
}

// TestFromJWKSBounds: a set over MaxJWKSBytes is refused (and logged), so
// no token verifies; FromJWKS still returns, so the service starts.
func TestFromJWKSBounds(t *testing.T) {
	k := newJWTKeys(t)
	j := newJWKS(t)
	big := rsaJWK("r1", &k.rsa.PublicKey)
	big["pad"] = strings.Repeat("x", MaxJWKSBytes)
	j.set(t, big)
	var logs bytes.Buffer
	f, err := FromJWKS(t.Context(), j.srv.URL, WithClaims("org", ""), WithJWTClock(func() time.Time { return jwtNow }),
		WithJWKSLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := call(f, sign(t, jwt.SigningMethodRS256, "r1", k.rsa, claims())); !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("a token verified against an oversized set: %v", err)
	}
	if !strings.Contains(logs.String(), "jwks: fetch failed") {
		t.Errorf("the failed fetch was not logged: %q", logs.String())
	}
}

// TestFirstOfJWTThenBaggage: FirstOf(FromJWT, FromBaggage) takes the
// token's tenant when there is a token, the baggage's when there is none
// (gate --tenant jwt,baggage), and a token that is there but wrong stops
// the search (baggage never stands in for a bad credential); with neither,
// ErrUnauthorized (no bearer token), as FromJWT alone answers.
func TestFirstOfJWTThenBaggage(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	jwtf, err := FromJWTWith(WithHMACKey(key), WithClaims("org", ""), WithJWTClock(func() time.Time { return jwtNow }))
	if err != nil {
		t.Fatal(err)
	}
	f := FirstOf(jwtf, FromBaggage())
	good := sign(t, jwt.SigningMethodHS256, "", key, claims())
	bad := sign(t, jwt.SigningMethodHS256, "", []byte("another key, another key, other!"), claims())
	for _, c := range []struct {
		auth, baggage, want string
		err                 error
	}{
		{good, "tenant.id=bob", "acme", nil},
		{"", "tenant.id=bob", "bob", nil},
		{"Basic dXNlcjpwdw==", "tenant.id=bob", "bob", nil},
		{bad, "tenant.id=bob", "", ErrUnauthorized},
		{"", "", "", ErrUnauthorized},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		if c.auth != "" {
			r.Header.Set("Authorization", c.auth)
		}
		if c.baggage != "" {
			r.Header.Set("Baggage", c.baggage)
		}
		got, err := f(r)
		if got.Tenant != c.want || !errors.Is(err, c.err) || (c.err == nil) != (err == nil) {
			t.Errorf("auth %.12q, baggage %q: %q, %v; want %q, %v", c.auth, c.baggage, got.Tenant, err, c.want, c.err)
		}
	}
	if _, err := jwtf(httptest.NewRequest("GET", "/", nil)); !errors.Is(err, ErrUnauthorized) {
		t.Errorf("FromJWT alone without a token: %v", err)
	}
	// Two Authorization headers, each a good token: which one names the
	// tenant would be a guess, so neither does (and baggage is not tried).
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Add("Authorization", good)
	r.Header.Add("Authorization", good)
	r.Header.Set("Baggage", "tenant.id=bob")
	if got, err := f(r); !errors.Is(err, ErrUnauthorized) || got.Tenant != "" || !strings.Contains(err.Error(), "more than one") {
		t.Errorf("two Authorization headers: %q, %v", got.Tenant, err)
	}
}
