package envoyrls_test

import (
	"encoding/json"
	"os"
	"testing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ratelimit/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/qtop-dev/qtop/internal/envoyrls"
)

// TestEnvoyExample: the Envoy configuration of docs/envoy.md decodes
// strictly into Envoy's bootstrap (every typed_config resolved), passes
// its validation rules, and asks with the descriptor keys this package
// reads.
func TestEnvoyExample(t *testing.T) {
	raw, err := os.ReadFile("../../docs/envoy/envoy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc any
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	js, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	var bs bootstrapv3.Bootstrap
	if err := protojson.Unmarshal(js, &bs); err != nil {
		t.Fatalf("not an Envoy bootstrap: %v", err)
	}
	if err := bs.ValidateAll(); err != nil {
		t.Fatalf("Envoy's validation: %v", err)
	}
	var hcm hcmv3.HttpConnectionManager
	if err := bs.StaticResources.Listeners[0].FilterChains[0].Filters[0].GetTypedConfig().UnmarshalTo(&hcm); err != nil {
		t.Fatal(err)
	}
	var rl ratelimitv3.RateLimit
	if err := hcm.HttpFilters[0].GetTypedConfig().UnmarshalTo(&rl); err != nil {
		t.Fatal(err)
	}
	if rl.Domain == "" || rl.FailureModeDeny || rl.RateLimitService.GrpcService.GetEnvoyGrpc().GetClusterName() != "qtop_rls" {
		t.Errorf("rate-limit filter: %v", &rl)
	}
	keys := map[string]bool{}
	for _, r := range hcm.GetRouteConfig().VirtualHosts[0].Routes {
		for _, l := range r.GetRoute().GetRateLimits() {
			for _, a := range l.Actions {
				keys[descriptorKey(a)] = true
			}
		}
	}
	for _, k := range []string{envoyrls.KeyTenant, envoyrls.KeyTier, envoyrls.KeyRoute} {
		if !keys[k] {
			t.Errorf("no action makes the descriptor key %q (have %v)", k, keys)
		}
	}
}

func descriptorKey(a *routev3.RateLimit_Action) string {
	if h := a.GetRequestHeaders(); h != nil {
		return h.DescriptorKey
	}
	return a.GetGenericKey().GetDescriptorKey()
}
