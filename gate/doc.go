// Package gate is a reverse proxy that puts qtop's agent in front of an
// HTTP service written in any language: every request is attributed to
// its tenant, admitted (tier shedding → CoDel → the tenant's RU bucket,
// the collector's throttles, fleet quotas, freshness and concurrency),
// forwarded, charged its real cost once the upstream has answered, and
// recorded once; the agent reports to the collector as one process of
// the service and applies the policy of the replies. Nothing on the
// request path calls anything remote.
//
// cmd/gate is the binary; embed the package to run the gate inside a Go
// program of your own:
//
//	a, err := agent.New(agent.WithCollector("http://collector:7070", token),
//		agent.WithService("shop-node"),
//		agent.WithTenant(agent.FromHeader("X-Tenant", "X-Tier")))
//	if err != nil { ... }
//	up, _ := url.Parse("http://127.0.0.1:3000")
//	g, err := gate.New(a, gate.Config{Upstream: up})
//	if err != nil { ... }
//	ln, _ := net.Listen("tcp", ":8080")
//	go g.Serve(ln)
//	...
//	g.Shutdown(ctx) // drains in-flight requests, then sends the agent's last report
//
// The proxy is net/http/httputil.ReverseProxy with a tuned transport:
// responses of unknown length and event streams (text/event-stream) are
// flushed as they come, WebSocket and other upgrades pass, hop-by-hop
// headers are dropped, X-Forwarded-For/Proto/Host are set, clients may
// speak HTTP/1.1 or h2c, and the upstream HTTP/1.1 with keep-alive (or
// h2c with Config.H2CUpstream). The tenant goes to the upstream as W3C
// baggage (tenant.id, tenant.tier), which OpenTelemetry instrumentation
// of the service picks up. An upstream that cannot be reached answers
// 502, one that does not answer within Config.Timeout 504, each with a
// one-line body that says so; qtop's own refusals are 429 with
// Retry-After (throttled, bucket in debt) and 503 (shed, dropped by
// CoDel), as the agent answers them.
//
// An event stream or an upgraded connection (WebSocket) is admitted like
// any request; once the upstream has answered it, the gate tells the
// agent (agent.Streaming) so that its latency is charged up to there, not
// for as long as the stream stays open, and its admission slot is given
// back at once. Its bytes are counted to the end.
package gate
