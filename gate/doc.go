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
// The proxy is net/http/httputil.ReverseProxy: responses of unknown
// length and event streams (text/event-stream) are flushed as they come,
// WebSocket and other upgrades pass, hop-by-hop headers are dropped,
// X-Forwarded-For/Proto/Host are set, clients may speak HTTP/1.1 or h2c,
// and the upstream HTTP/1.1 with keep-alive (or h2c with
// Config.H2CUpstream). The query passes as the client sent it (httputil
// alone drops parameters that hold a ';'), and a request head over
// Config.MaxHeaderBytes (64 KiB) is answered 431.
//
// Requests to an http:// upstream without a body or with one of known
// length up to 64 KiB go through the gate's own HTTP/1.1 client, which
// writes the request and reads the answer on the request's goroutine
// (net/http's Transport hands each to a writer and a reader goroutine of
// the connection: a third of the gate's CPU went to that hand-off); everything else —
// upgrades, Expect: 100-continue, larger or streamed uploads, https and
// h2c upstreams — goes through net/http's Transport, as every request
// does with Config.StdTransport. The client keeps up to
// Config.MaxIdleConnsPerHost connections alive (newest reused first,
// closed after 90 s idle), gives a connection back only when the answer
// was read to its end and neither side asked to close it, and sends a
// GET, HEAD, OPTIONS or TRACE without a body (or a request with an
// Idempotency-Key) once more on a new connection when a kept-alive one
// turns out closed before any byte of the answer. Before every request
// it checks that the kept-alive connection is still open and that the
// upstream sent nothing on it since its last answer (a body after a 204
// or a HEAD answer would be read as the next client's answer); such a
// connection is closed. The tenant goes to the upstream as W3C
// baggage (tenant.id, tenant.tier), which OpenTelemetry instrumentation
// of the service picks up. An upstream that cannot be reached answers
// 502, one that does not answer within Config.Timeout 504, each with a
// one-line body that says so; qtop's own refusals are 429 with
// Retry-After (throttled, bucket in debt) and 503 (shed, dropped by
// CoDel), as the agent answers them.
//
// Serve answers with the gate's own HTTP/1.1 server the common request:
// HTTP/1.1, no body or one of known length up to 64 KiB, a head of up to
// 4 KiB that parses strictly, no upgrade and no Expect. It reads the
// head, runs the handler and writes the response on the connection's
// goroutine, without net/http's per-request maps, background read and
// deadline moves. A connection whose request is anything else is handed,
// with the bytes read so far, to net/http's server, which serves it from
// then on (h2c, WebSocket, chunked and large uploads, HTTP/1.0, heads it
// refuses with 400); Config.StdServer serves every connection that way.
// The own server notices a client that left when a write to it fails, or,
// for a request still waiting after a second, by reading its connection.
// Either server keeps at most Config.MaxConns client connections
// (internal/connlimit): at the bound the one idle the longest is closed to
// make room for a new one.
//
// Every write to a client must end within Config.SendTimeout (60 s by
// default, as nginx's send_timeout): a client that stops reading its
// response is cut off with a reset, counted client_gone, and its
// admission slot goes to the next request; without it a few hundred
// such clients would hold all the gate's slots for good. Likewise each
// read of a request body that waits for the client must end within
// Config.BodyTimeout (60 s, nginx's client_body_timeout), chunked, large
// and h2c uploads included: a client that stops sending gets 408, counted
// body_timeout.
//
// After its headers, each read of the upstream's answer must bring
// something within Config.ReadTimeout (60 s by default, as nginx's
// proxy_read_timeout): a body, an event stream or the upstream side of a
// WebSocket that goes silent that long is cut off and its connection
// closed, counted in qtop_gate_upstream_answers_cut_total{reason="read_timeout"}; without it
// an upstream that hangs mid-answer would hold its client for good. The
// time the gate waits for a slow client does not count.
//
// An event stream or an upgraded connection (WebSocket) is admitted like
// any request; once the upstream has answered it, the gate tells the
// agent (agent.Streaming) so that its latency is charged up to there, not
// for as long as the stream stays open, and its admission slot is given
// back at once. Its bytes are counted to the end.
package gate
