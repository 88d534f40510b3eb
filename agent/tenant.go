package agent

import (
	"errors"
	"fmt"
	"net/http"
	"net/textproto"
	"net/url"
	"strings"

	"github.com/qtop-dev/qtop/tenant"
)

// A TenantFunc finds the tenant of a request. It must read authenticated
// data (a verified token, a header set by a trusted edge); the middleware
// validates what it returns (tenant.Tags.Validate) and answers an error
// with 401 (ErrUnauthorized) or 400.
type TenantFunc func(r *http.Request) (tenant.Tags, error)

// MaxTokenBytes bounds the bearer token FromJWT reads.
const MaxTokenBytes = 8 << 10

// FromContext reads the tags an earlier middleware put in the request's
// context with tenant.With.
func FromContext() TenantFunc {
	return func(r *http.Request) (tenant.Tags, error) {
		if t, ok := tenant.From(r.Context()); ok {
			return t, nil
		}
		return tenant.Tags{}, ErrNoTenant
	}
}

// FromHeader reads the tenant from one request header and, when
// tierHeader is not empty, the tier (T0 … T3) from another. Only for
// traffic from a trusted edge that sets them from authenticated data and
// strips them from client requests. A header sent several times with
// different values is ErrAmbiguousTenant: an edge that adds its header
// rather than replacing the client's would otherwise leave the client's
// value first.
func FromHeader(tenantHeader, tierHeader string) TenantFunc {
	// Canonical once, here, rather than by Header.Get on every request.
	tk := textproto.CanonicalMIMEHeaderKey(tenantHeader)
	rk := textproto.CanonicalMIMEHeaderKey(tierHeader)
	return func(r *http.Request) (tenant.Tags, error) {
		v, err := single(r.Header, tk)
		if err != nil {
			return tenant.Tags{}, err
		}
		t := tenant.Tags{Tenant: v}
		if t.Tenant == "" {
			return t, ErrNoTenant
		}
		if rk != "" {
			v, err := single(r.Header, rk)
			if err != nil {
				return t, err
			}
			if v != "" {
				tier, err := tenant.ParseTier(v)
				if err != nil {
					return t, err
				}
				t.Tier = tier
			}
		}
		return t, nil
	}
}

// single returns the value of header k ("" when absent), or
// ErrAmbiguousTenant when it was sent with different values.
func single(h http.Header, k string) (string, error) {
	v := h[k]
	if len(v) == 0 {
		return "", nil
	}
	for _, o := range v[1:] {
		if o != v[0] {
			return "", fmt.Errorf("%w: header %s sent %d times with different values", ErrAmbiguousTenant, k, len(v))
		}
	}
	return v[0], nil
}

// FromPathSegment reads the tenant from the n-th segment of the request
// path (0: "acme" in "/acme/orders"), for APIs that route by tenant. The
// segment is split on the path as sent and then unescaped, as ServeMux
// does for a {tenant} wildcard; one that unescapes to "." or "..", or
// holds an encoded "/", is ErrAmbiguousTenant, since the handler (or a
// proxy cleaning the path) would serve another tenant than the one
// charged; so is one with a ';' as sent (a path parameter, which servers
// such as Tomcat and Spring strip: "/acme;x=1/" would be served as acme
// and charged to another name) or with space at either end. Names are
// compared as sent: "ACME" is not "acme".
func FromPathSegment(n int) TenantFunc {
	return func(r *http.Request) (tenant.Tags, error) {
		p := strings.TrimPrefix(r.URL.EscapedPath(), "/")
		for i := 0; i < n; i++ {
			j := strings.IndexByte(p, '/')
			if j < 0 {
				return tenant.Tags{}, ErrNoTenant
			}
			p = p[j+1:]
		}
		if j := strings.IndexByte(p, '/'); j >= 0 {
			p = p[:j]
		}
		if p == "" {
			return tenant.Tags{}, ErrNoTenant
		}
		seg, err := url.PathUnescape(p)
		if err != nil || seg == "." || seg == ".." || strings.IndexByte(seg, '/') >= 0 || strings.IndexByte(p, ';') >= 0 ||
			strings.TrimSpace(seg) != seg {
			return tenant.Tags{}, fmt.Errorf("%w: path segment %d is not a tenant name (a bad escape, an encoded /, a ;, space at an end, . or ..)", ErrAmbiguousTenant, n)
		}
		return tenant.Tags{Tenant: seg}, nil
	}
}

// FromBaggage reads tenant.id and tenant.tier from the request's W3C
// baggage header, as the agent's Transport (or an OpenTelemetry
// propagator) sends them. Only for traffic between services that trust
// each other: a client can send any baggage.
//
// The other members of the header are not parsed (tenant.FromBaggageHeader):
// a header OpenTelemetry's parser would refuse as a whole (more than 64
// members, one malformed member) still gives its tenant. Only the first
// tenant.MaxBaggageBytes bytes and tenant.MaxBaggageMembers members are
// read; a tenant.id beyond them is not found (ErrNoTenant).
func FromBaggage() TenantFunc {
	return func(r *http.Request) (tenant.Tags, error) {
		h := r.Header.Values("Baggage")
		if len(h) == 0 {
			return tenant.Tags{}, ErrNoTenant
		}
		t, err := tenant.FromBaggageHeader(h)
		if errors.Is(err, tenant.ErrBaggageMissing) {
			return t, ErrNoTenant
		}
		return t, err
	}
}

// FirstOf tries each function in turn and returns the first tenant
// found; a function that finds none (ErrNoTenant), or a JWT source on a
// request without a bearer token, passes to the next; any other error (a
// token that is there but invalid) stops the search. When no function
// finds a tenant, the error is the JWT source's (ErrUnauthorized: no
// bearer token) if one was asked, else ErrNoTenant.
func FirstOf(fs ...TenantFunc) TenantFunc {
	return func(r *http.Request) (tenant.Tags, error) {
		var noToken error
		for _, f := range fs {
			t, err := f(r)
			switch {
			case err == ErrNoTenant:
			case err == errNoToken:
				noToken = err
			default:
				return t, err
			}
		}
		if noToken != nil {
			return tenant.Tags{}, noToken
		}
		return tenant.Tags{}, ErrNoTenant
	}
}

// FromJWT reads the tenant (and, when tierClaim is not empty, the tier)
// from string claims of the request's "Authorization: Bearer" JSON Web
// Token, after verifying it: the token must be signed with HS256 (HMAC
// SHA-256) under key, and be within its exp and nbf (when present);
// anything else is ErrUnauthorized. It is FromJWTWith(WithHMACKey(key),
// WithClaims(tenantClaim, tierClaim)); for RS256, ES256 or EdDSA, an
// audience, an issuer or a leeway use FromJWTWith, and for an identity
// provider's rotating keys FromJWKS.
func FromJWT(key []byte, tenantClaim, tierClaim string) TenantFunc {
	f, err := FromJWTWith(WithHMACKey(key), WithClaims(tenantClaim, tierClaim))
	if err != nil {
		return func(*http.Request) (tenant.Tags, error) {
			return tenant.Tags{}, fmt.Errorf("%w: %v", ErrUnauthorized, err)
		}
	}
	return f
}
