package envoyrls_test

import (
	"errors"
	"testing"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/proto"

	"github.com/qtop-dev/qtop/internal/envoyrls"
	"github.com/qtop-dev/qtop/policy"
	"github.com/qtop-dev/qtop/tenant"
)

// FuzzDecide: any request decoded from the wire is answered with one
// status per descriptor, or refused with ErrInvalid; nothing panics.
func FuzzDecide(f *testing.F) {
	seed := &rlsv3.RateLimitRequest{Domain: "edge", HitsAddend: 3, Descriptors: []*rlcommon.RateLimitDescriptor{
		{Entries: []*rlcommon.RateLimitDescriptor_Entry{{Key: "tenant", Value: "acme"}, {Key: "tier", Value: "T3"}}},
		{Entries: []*rlcommon.RateLimitDescriptor_Entry{{Key: "tenant", Value: "bigcorp"}, {Key: "route", Value: "GET /"}}, IsNegativeHits: true},
	}}
	b, _ := proto.Marshal(seed)
	f.Add(b)
	f.Add([]byte{})
	src := &source{}
	src.set(throttle("bigcorp", 3), policy.Rule{ID: "t3", Tier: tenant.T3, Action: policy.Throttle, RUPerSecond: 0.5,
		Expires: t0.Add(time.Hour), Reason: "x"})
	svc, err := envoyrls.New(src, envoyrls.WithMaxKeys(64))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var req rlsv3.RateLimitRequest
		if proto.Unmarshal(b, &req) != nil {
			return
		}
		resp, err := svc.DecideAt(t0, &req)
		if err != nil {
			if !errors.Is(err, envoyrls.ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
			return
		}
		if len(resp.Statuses) != len(req.Descriptors) {
			t.Fatalf("%d statuses for %d descriptors", len(resp.Statuses), len(req.Descriptors))
		}
	})
}
