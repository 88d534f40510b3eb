package envoyrls_test

import (
	"fmt"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/qtop-dev/qtop/internal/envoyrls"
	"github.com/qtop-dev/qtop/policy"
)

// staticPolicy is a policy that never changes.
type staticPolicy policy.Policy

func (p staticPolicy) PolicyVersion() uint64 { return p.Version }
func (p staticPolicy) Policy() policy.Policy { return policy.Policy(p) }

// A throttle of 2 RU/s on bigcorp, at 1 RU a hit: its one-second burst
// admits two requests at once, the third is over the limit for half a
// second; acme has no rule.
func Example() {
	now := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	src := staticPolicy{Version: 1, Rules: []policy.Rule{{ID: "r1", Tenant: "bigcorp", Action: policy.Throttle,
		RUPerSecond: 2, Expires: now.Add(time.Hour), Reason: "noisy at 9am"}}}
	svc, err := envoyrls.New(src)
	if err != nil {
		panic(err)
	}
	ask := func(t string) {
		req := &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*rlcommon.RateLimitDescriptor{{
			Entries: []*rlcommon.RateLimitDescriptor_Entry{{Key: "tenant", Value: t}, {Key: "route", Value: "GET /reports"}}}}}
		resp, err := svc.DecideAt(now, req)
		if err != nil {
			panic(err)
		}
		st := resp.Statuses[0]
		fmt.Println(t, resp.OverallCode, st.GetCurrentLimit().GetRequestsPerUnit(), st.LimitRemaining, st.GetDurationUntilReset().AsDuration())
	}
	ask("bigcorp")
	ask("bigcorp")
	ask("bigcorp")
	ask("acme")
	// Output:
	// bigcorp OK 2 1 500ms
	// bigcorp OK 2 0 1s
	// bigcorp OVER_LIMIT 2 0 500ms
	// acme OK 0 0 0s
}
