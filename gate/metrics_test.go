package gate_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/qtop-dev/qtop/gate"
)

func TestMetricsByOutcome(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTeapot) }))
	defer up.Close()
	reg := prometheus.NewPedanticRegistry()
	s := start(t, up.URL, gate.Config{Registerer: reg})
	get(t, http.DefaultClient, s.base+"/a", "acme")
	get(t, http.DefaultClient, s.base+"/a", "acme")
	get(t, http.DefaultClient, s.base+"/a", "")
	want := `
# HELP qtop_gate_requests_total Requests through the gate by outcome: upstream (forwarded and answered), throttled (429), shed (503), not_modified (304), no_tenant, upstream_error (502), upstream_timeout (504), client_gone, body_timeout (408: the request body stopped arriving), bad_request (400/405: a request body malformed or cut short, Content-Length with Transfer-Encoding, CONNECT).
# TYPE qtop_gate_requests_total counter
qtop_gate_requests_total{outcome="bad_request"} 0
qtop_gate_requests_total{outcome="body_timeout"} 0
qtop_gate_requests_total{outcome="client_gone"} 0
qtop_gate_requests_total{outcome="no_tenant"} 1
qtop_gate_requests_total{outcome="not_modified"} 0
qtop_gate_requests_total{outcome="shed"} 0
qtop_gate_requests_total{outcome="throttled"} 0
qtop_gate_requests_total{outcome="upstream"} 2
qtop_gate_requests_total{outcome="upstream_error"} 0
qtop_gate_requests_total{outcome="upstream_timeout"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "qtop_gate_requests_total"); err != nil {
		t.Fatal(err)
	}
	if n, err := testutil.GatherAndCount(reg, "qtop_gate_upstream_seconds"); err != nil || n != 1 {
		t.Fatalf("upstream histogram: %d %v", n, err)
	}
	if probs, err := testutil.GatherAndLint(reg, "qtop_gate_requests_total", "qtop_gate_upstream_seconds", "qtop_gate_in_flight_requests"); err != nil || len(probs) > 0 {
		t.Fatalf("lint: %v %v", probs, err)
	}
}

func TestConfigErrors(t *testing.T) {
	for _, u := range []string{"", "ftp://x", "http://", "http://h/?q=1"} {
		cfg := gate.Config{}
		if u != "" {
			cfg.Upstream, _ = url.Parse(u)
		}
		if err := cfg.Validate(); !errors.Is(err, gate.ErrConfig) {
			t.Errorf("%q: %v", u, err)
		}
	}
	if _, err := gate.New(nil, gate.Config{}); !errors.Is(err, gate.ErrConfig) {
		t.Errorf("no agent: %v", err)
	}
}
