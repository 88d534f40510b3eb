package agent

import (
	"net/http"

	"go.opentelemetry.io/otel/baggage"

	"github.com/qtop-dev/qtop/tenant"
)

// Transport returns base (http.DefaultTransport when nil) behind a
// RoundTripper that sends the tenant of each request's context as W3C
// baggage (tenant.id, tenant.tier), merged with the baggage the request
// already carries, so that a downstream service whose agent reads
// FromBaggage attributes the same tenant. A request without a tenant is
// sent as it is.
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
	if h := req.Header.Values("Baggage"); len(h) > 0 {
		// An OpenTelemetry propagator may have written the header already.
		if hb, err := baggage.Parse(joinComma(h)); err == nil {
			b = hb
		}
	}
	b, err := tenant.Baggage(b, tags)
	if err != nil {
		return t.base.RoundTrip(req)
	}
	// A RoundTripper must not change the caller's request.
	out := req.Clone(req.Context())
	out.Header.Set("Baggage", b.String())
	return t.base.RoundTrip(out)
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
