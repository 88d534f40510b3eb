package agent

import (
	"net/http"
	"strings"

	"go.opentelemetry.io/otel/baggage"

	"github.com/qtop-dev/qtop/tenant"
)

// Transport returns base (http.DefaultTransport when nil) behind a
// RoundTripper that sends the tenant of each request's context as W3C
// baggage (tenant.id, tenant.tier), merged with the baggage the request
// already carries, so that a downstream service whose agent reads
// FromBaggage attributes the same tenant. A request without a tenant is
// sent as it is. A baggage header OpenTelemetry's parser refuses (more
// than 64 members or 8192 bytes, one malformed member) is kept as it is
// but for its tenant.id and tenant.tier members: the tenant's go first,
// where FromBaggage reads them.
func (a *Agent) Transport(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return &transport{base: base}
}

type transport struct{ base http.RoundTripper }

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	tags, ok := tenant.Lookup(req.Context())
	if !ok {
		return t.base.RoundTrip(req)
	}
	b := baggage.FromContext(req.Context())
	h := req.Header.Values("Baggage")
	if len(h) > 0 {
		// An OpenTelemetry propagator may have written the header already.
		hb, err := baggage.Parse(joinComma(h))
		if err != nil {
			return t.rawTenant(req, h, tags)
		}
		b = hb
	}
	b, err := tenant.Baggage(b, tags)
	if err != nil {
		return t.rawTenant(req, h, tags) // one member too many for the parsed form
	}
	// A RoundTripper must not change the caller's request.
	out := req.Clone(req.Context())
	out.Header.Set("Baggage", b.String())
	return t.base.RoundTrip(out)
}

// rawTenant sends req with its baggage header h as it is but for its
// tenant members, the tenant's (tags) first: h is one that OpenTelemetry's
// parser refuses, which FromBaggage still reads. An invalid tenant is not
// sent.
func (t *transport) rawTenant(req *http.Request, h []string, tags tenant.Tags) (*http.Response, error) {
	own, err := tenant.Baggage(baggage.Baggage{}, tags)
	if err != nil {
		return t.base.RoundTrip(req)
	}
	v := own.String()
	if rest := withoutTenantMembers(joinComma(h)); rest != "" {
		v += "," + rest
	}
	out := req.Clone(req.Context())
	out.Header.Set("Baggage", v)
	return t.base.RoundTrip(out)
}

// withoutTenantMembers is the baggage list s without its tenant.id and
// tenant.tier members (a member's key ends at '=' or ';').
func withoutTenantMembers(s string) string {
	var b strings.Builder
	for m := range strings.SplitSeq(s, ",") {
		key := m
		if j := strings.IndexAny(key, "=;"); j >= 0 {
			key = key[:j]
		}
		if k := strings.TrimSpace(key); k == tenant.BaggageTenant || k == tenant.BaggageTier {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(m)
	}
	return b.String()
}

func joinComma(h []string) string {
	if len(h) == 1 {
		return h[0]
	}
	n := len(h) - 1
	for _, s := range h {
		n += len(s)
	}
	b := make([]byte, 0, n)
	for i, s := range h {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, s...)
	}
	return string(b)
}
