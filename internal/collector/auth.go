package collector

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
)

// Role is what a credential may do. There are three, each with its own
// token, so that a reporting process's credential can neither read the
// fleet nor change policy:
//
//   - RoleReport: send reports (POST /v1/reports, and any other intake
//     such as an OTLP receiver's /v1/traces).
//   - RoleRead: read the fleet (GET /v1/live, /v1/live/stream, /v1/report,
//     /v1/policy, /metrics).
//   - RoleAdmin: change policy (POST /v1/policy) and read the audit
//     (GET /v1/audit); the admin token may also read.
type Role uint8

// The roles.
const (
	RoleReport Role = iota + 1
	RoleRead
	RoleAdmin
)

func (r Role) String() string {
	switch r {
	case RoleReport:
		return "report"
	case RoleRead:
		return "read"
	case RoleAdmin:
		return "admin"
	}
	return fmt.Sprintf("role(%d)", uint8(r))
}

// ErrUnauthorized: a request lacks the credential its role needs; the
// message says which token is wanted (never the token).
var ErrUnauthorized = errors.New("collector: unauthorized")

// adminTokenFile is where a generated admin token is kept in DataDir
// (mode 0600): it is never logged.
const adminTokenFile = "admin-token"

// Authorize checks that r carries the bearer token of role, and returns
// the name of the credential (for audit records: "admin", "report",
// "read", or "anonymous" where the role needs none). A role whose token
// is not configured needs none — which New allows only on a loopback
// address or with Config.Insecure — except RoleAdmin, which always has
// one. Every intake of the collector calls it: an OTLP receiver's
// /v1/traces calls Authorize(r, RoleReport).
func (s *Server) Authorize(r *http.Request, role Role) (who string, err error) {
	got, ok := bearer(r)
	tok := s.tokens.current() // tokenfiles.go: as last read from their files
	switch role {
	case RoleReport:
		if tok.report == "" {
			return "anonymous", nil
		}
		if ok && tokenEqual(got, tok.report) {
			return RoleReport.String(), nil
		}
	case RoleRead:
		if ok && tokenEqual(got, tok.admin) {
			return RoleAdmin.String(), nil
		}
		if tok.read == "" {
			return "anonymous", nil
		}
		if ok && tokenEqual(got, tok.read) {
			return RoleRead.String(), nil
		}
		if ok && tok.peer != "" && tokenEqual(got, tok.peer) {
			return "peer", nil
		}
	case RoleAdmin:
		if ok && tokenEqual(got, tok.admin) {
			return RoleAdmin.String(), nil
		}
	default:
		return "", fmt.Errorf("%w: unknown role %d", ErrUnauthorized, uint8(role))
	}
	if !ok {
		return "", fmt.Errorf("%w: this needs the %s token (Authorization: Bearer …)", ErrUnauthorized, role)
	}
	return "", fmt.Errorf("%w: wrong token for %s", ErrUnauthorized, role)
}

// authorized wraps h so that it runs only for requests Authorize lets
// through for role; others get 401 with a JSON reason.
func (s httpAPI) authorized(role Role, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if _, err := s.Authorize(r, role); err != nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="qtop"`)
			writeError(w, http.StatusUnauthorized, err.Error(), 0)
			return
		}
		h(w, r)
	}
}

// tokenEqual compares in constant time (hashes of equal length, so the
// length does not leak either).
func tokenEqual(got, want string) bool {
	a, b := sha256.Sum256([]byte(got)), sha256.Sum256([]byte(want))
	return subtle.ConstantTimeCompare(a[:], b[:]) == 1
}

// checkExposure refuses a listener that is not loopback while its
// traffic is in clear or reports or reads need no credential, unless
// Config.Insecure says so.
func checkExposure(c *Config) error {
	if c.Insecure || isLoopback(c.Listen) {
		return nil
	}
	var open []string
	if !c.TLS.Enabled() {
		open = append(open, "reports, reads and tokens would travel in clear (set --tls-cert and --tls-key)")
	}
	if c.Token == "" {
		open = append(open, "anyone could post reports (set --token)")
	}
	if c.ReadToken == "" {
		open = append(open, "anyone could read every tenant's usage (set --read-token)")
	}
	if len(open) == 0 {
		return nil
	}
	return fmt.Errorf("%w: listening on %s, which is not loopback: %s; or pass --insecure to run open on purpose",
		ErrConfig, c.Listen, strings.Join(open, ", "))
}

// isLoopback reports whether the host of addr is localhost or a loopback
// IP (":0" and "0.0.0.0:0" are not).
func isLoopback(addr string) bool {
	host, _, _ := net.SplitHostPort(addr)
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
