package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// runGate runs the command with args in front of an upstream that echoes
// the tenant's baggage, and returns its address and a stop that sends
// SIGTERM and waits for exit 0.
func runGate(t *testing.T, args ...string) (addr string, stop func()) {
	t.Helper()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, r.Header.Get("Baggage"))
	}))
	t.Cleanup(up.Close)
	ready := make(chan string, 1)
	done := make(chan int, 1)
	var errb strings.Builder
	args = append([]string{"--listen", "127.0.0.1:0", "--service", "api", "--upstream", up.URL, "--grace", "5s"}, args...)
	go func() { done <- run(args, io.Discard, &errb, ready) }()
	select {
	case addr = <-ready:
	case code := <-done:
		t.Fatalf("exited %d: %s", code, errb.String())
	}
	return addr, func() {
		http.DefaultClient.CloseIdleConnections()
		syscall.Kill(os.Getpid(), syscall.SIGTERM)
		if code := <-done; code != 0 {
			t.Fatalf("exit %d: %s", code, errb.String())
		}
	}
}

// getAs sends GET / with a bearer token and returns the status and body.
func getAs(t *testing.T, addr, token string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// sameMembers compares two baggage headers as sets of members: a
// header's members come in no set order.
func sameMembers(a, b string) bool {
	x, y := strings.Split(a, ","), strings.Split(b, ",")
	slices.Sort(x)
	slices.Sort(y)
	return slices.Equal(x, y)
}

func signed(t *testing.T, m jwt.SigningMethod, kid string, key any, claims jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(m, claims)
	if kid != "" {
		tok.Header["kid"] = kid
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestJWKS: with --jwks-url the gate takes the tenant from RS256 tokens
// verified by the identity provider's key set (by kid), checks iss and
// aud, and refuses tokens signed by another key.
func TestJWKS(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	b64 := base64.RawURLEncoding.EncodeToString
	set, _ := json.Marshal(map[string]any{"keys": []map[string]string{{
		"kty": "RSA", "kid": "k1", "use": "sig", "alg": "RS256",
		"n": b64(key.N.Bytes()), "e": b64(big.NewInt(int64(key.E)).Bytes())}}})
	idp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(set)
	}))
	defer idp.Close()
	addr, stop := runGate(t, "--tenant", "jwt", "--jwks-url", idp.URL+"/jwks", "--jwt-issuer", "https://idp.example", "--jwt-audience", "shop")
	defer stop()
	exp := time.Now().Add(time.Hour).Unix()
	good := jwt.MapClaims{"tenant": "acme", "tier": "T1", "iss": "https://idp.example", "aud": "shop", "exp": exp}
	if code, body := getAs(t, addr, signed(t, jwt.SigningMethodRS256, "k1", key, good)); code != 200 || !sameMembers(body, "tenant.id=acme,tenant.tier=T1") {
		t.Errorf("a token of the key set: %d %q", code, body)
	}
	other, _ := rsa.GenerateKey(rand.Reader, 2048)
	wrongAud := jwt.MapClaims{"tenant": "acme", "iss": "https://idp.example", "aud": "billing", "exp": exp}
	for name, tok := range map[string]string{
		"another key":                   signed(t, jwt.SigningMethodRS256, "k1", other, good),
		"unknown kid":                   signed(t, jwt.SigningMethodRS256, "k2", other, good),
		"wrong audience":                signed(t, jwt.SigningMethodRS256, "k1", key, wrongAud),
		"HS256 with the public modulus": signed(t, jwt.SigningMethodHS256, "k1", key.N.Bytes(), good),
	} {
		if code, body := getAs(t, addr, tok); code != http.StatusUnauthorized {
			t.Errorf("%s: %d %q, want 401", name, code, body)
		}
	}
}

// TestJWTPublicKeyFile: --jwt-public-key-file verifies ES256 tokens with
// a PEM public key.
func TestJWTPublicKeyFile(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "idp.pem")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	addr, stop := runGate(t, "--tenant", "jwt,header", "--jwt-public-key-file", path, "--jwt-tier-claim", "")
	defer stop()
	tok := signed(t, jwt.SigningMethodES256, "", key, jwt.MapClaims{"tenant": "globex", "exp": time.Now().Add(time.Hour).Unix()})
	if code, body := getAs(t, addr, tok); code != 200 || body != "tenant.id=globex" {
		t.Errorf("ES256 token: %d %q", code, body)
	}
}
