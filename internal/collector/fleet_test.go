package collector

import (
	"context"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/internal/testsvc"
	"github.com/qtop-dev/qtop/meter"
	"github.com/qtop-dev/qtop/policy"
	"github.com/qtop-dev/qtop/report"
	"github.com/qtop-dev/qtop/store/chstore"
	"github.com/qtop-dev/qtop/tenant"
)

func TestCheckPeers(t *testing.T) {
	got, err := checkPeers([]string{"127.0.0.1:7071", " http://c2:7070/ ", ""})
	if err != nil || len(got) != 2 || got[0] != "http://127.0.0.1:7071" || got[1] != "http://c2:7070" {
		t.Fatalf("%v %v", got, err)
	}
	for _, bad := range []string{"ftp://x", "http://", "http://h:1/v1/live"} {
		if _, err := checkPeers([]string{bad}); err == nil {
			t.Errorf("peer %q accepted", bad)
		}
	}
	if _, err := checkPeers(make([]string, MaxPeers+1)); err == nil {
		t.Error("too many peers accepted")
	}
}

// fleetRig is three collectors on the test cluster, each the others' peer,
// sharing the policy through the store.
type fleetRig struct {
	cluster  string
	addrs    []string
	db       string
	storeURL string
	servers  []*Server
	urls     []string // base URLs
	clk      *clock   // the collectors' clock: the live view moves when the test says
}

const fleetToken = "fleet-token"

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func newFleetRig(t *testing.T, n int) *fleetRig {
	t.Helper()
	name, addrs := testsvc.ClickHouseCluster(t)
	r := &fleetRig{cluster: name, addrs: addrs, db: fmt.Sprintf("qtop_fleet_%d_%d", os.Getpid(), time.Now().UnixNano()%1e6),
		clk: &clock{t: time.Now().Truncate(time.Second)}}
	r.storeURL = "clickhouse://" + strings.Join(addrs, ",") + "/" + r.db
	t.Cleanup(func() {
		conn, err := clickhouse.Open(&clickhouse.Options{Addr: addrs[:1]})
		if err != nil {
			return
		}
		defer conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		conn.Exec(ctx, "DROP DATABASE IF EXISTS "+r.db+" ON CLUSTER "+name)
	})
	listen := make([]string, n)
	for i := range listen {
		listen[i] = freeAddr(t)
		r.urls = append(r.urls, "http://"+listen[i])
	}
	r.servers = make([]*Server, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n { // together: their migrations race, as they would
		wg.Add(1)
		go func() {
			defer wg.Done()
			var peers []string
			for j, l := range listen {
				if j != i {
					peers = append(peers, l)
				}
			}
			r.servers[i], errs[i] = New(Config{Listen: listen[i], Store: r.storeURL, FleetConfig: FleetConfig{Cluster: name, Peers: peers, SharedPolicy: true},
				Token: fleetToken, AdminToken: fleetToken, DataDir: t.TempDir(), Writer: fmt.Sprintf("c%d", i), Now: r.clk.Now,
				Registerer: prometheus.NewRegistry()})
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("collector %d: %v", i, err)
		}
		if err := r.servers[i].Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		s := r.servers[i]
		t.Cleanup(func() { s.Shutdown(context.Background()) })
	}
	return r
}

// fleetProc is one application process reporting to the fleet.
type fleetProc struct {
	rec *meter.Recorder
	rep *meter.Reporter

	mu     sync.Mutex
	policy policy.Policy
}

func (r *fleetRig) process(t *testing.T, name string, opts ...meter.ReporterOption) *fleetProc {
	t.Helper()
	p := &fleetProc{rec: newRec(t, meter.WithSource(report.Source{Service: "api", Instance: name, Host: "h"}))}
	var urls []string
	for _, u := range r.urls {
		urls = append(urls, u+api.PathReports)
	}
	opts = append([]meter.ReporterOption{meter.WithCollectors(urls[1:]...), meter.WithToken(fleetToken),
		meter.WithBackoff(10*time.Millisecond, 200*time.Millisecond),
		meter.WithPolicyHandler(func(pol policy.Policy) { p.mu.Lock(); p.policy = pol; p.mu.Unlock() })}, opts...)
	rep, err := meter.NewReporter(urls[0], p.rec, opts...)
	if err != nil {
		t.Fatal(err)
	}
	p.rep = rep
	t.Cleanup(func() { rep.Shutdown(context.Background()) })
	return p
}

func (p *fleetProc) hasRule(id string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range p.policy.Rules {
		if r.ID == id {
			return true
		}
	}
	return false
}

// TestFleetOnCluster: three collectors on the replicated cluster, twelve
// processes spread over them. qtop asking any one collector sees the
// fleet (the sum of the three); a throttle posted to one reaches every
// process, whichever collector it reports to, and is audited once; what
// the store holds, read through the Distributed tables, is what the
// processes recorded.
func TestFleetOnCluster(t *testing.T) {
	r := newFleetRig(t, 3)
	const nproc, ntenants = 12, 5
	// The processes' names decide their collectors: add processes until
	// each collector has some (twelve leave one out about 2% of the time).
	var procs []*fleetProc
	perCollector := map[string]int{}
	for i := 0; len(procs) < nproc || len(perCollector) < 3; i++ {
		if i == 100 {
			t.Fatalf("processes by collector %v: want all three used", perCollector)
		}
		p := r.process(t, fmt.Sprintf("p%02d", i), meter.WithInterval(200*time.Millisecond))
		procs = append(procs, p)
		perCollector[p.rep.Collector()]++
	}
	want := map[string]uint64{}
	ctx := context.Background()
	for round := range 3 {
		for i, p := range procs {
			for k := range ntenants {
				name := fmt.Sprintf("tenant%d", k)
				n := (i + 1) * (k + 1) * (round + 1)
				for range n {
					p.rec.Record(meter.Record{Tags: tenant.Tags{Tenant: name, Route: "GET /x"}, Kind: report.KindRequest,
						Duration: time.Millisecond, RU: 1})
				}
				want[name] += uint64(n)
			}
			fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			if err := p.rep.ForceFlush(fctx); err != nil {
				t.Fatal(err)
			}
			cancel()
		}
	}

	var total uint64
	for _, n := range want {
		total += n
	}
	// Every report was acknowledged in the collectors' current second; the
	// live view shows complete seconds: end this one.
	r.clk.Add(time.Second)

	// The live view of any collector is the fleet's.
	for i, base := range r.urls {
		c, err := api.NewClient(base, api.WithTop(3))
		if err != nil {
			t.Fatal(err)
		}
		snap, err := c.Get(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var locals []api.Snapshot
		for _, s := range r.servers {
			locals = append(locals, s.Snapshot(s.cfg.Now(), api.MeasureRU, maxTop))
		}
		if snap.Collector.Sources != len(procs) {
			t.Errorf("collector %d: fleet view has %d sources, want %d", i, snap.Collector.Sources, len(procs))
		}
		if len(snap.Peers) != 3 || !snap.Peers[1].OK || !snap.Peers[2].OK {
			t.Errorf("collector %d: peers %+v", i, snap.Peers)
		}
		var fleetRU, localRU, fleetReq float64
		for _, row := range snap.Tenants {
			fleetRU += row.RUPerSec
			fleetReq += row.ReqPerSec
		}
		if got := fleetReq * rateN; math.Abs(got-float64(total)) > 0.5 {
			t.Errorf("collector %d: the fleet view holds %v requests over its window, the processes recorded %d", i, got, total)
		}
		for _, l := range locals {
			for _, row := range l.Tenants {
				localRU += row.RUPerSec
			}
		}
		if d := fleetRU - localRU; d > 1e-6*localRU || d < -1e-6*localRU {
			t.Errorf("collector %d: fleet RU/s %v, the collectors' own views sum to %v", i, fleetRU, localRU)
		}
		if len(snap.Tenants) != 4 || snap.Tenants[0].Tenant != "tenant4" || snap.Tenants[3].Tenant != api.OtherTenant {
			t.Errorf("collector %d: top tenants %+v", i, snap.Tenants)
		}
	}

	// The fleet view's lag: a report acknowledged by one collector, seen
	// through another (the live view shows complete seconds: up to 1 s).
	probe := procs[0]
	var other string
	for _, u := range r.urls {
		if !strings.HasPrefix(probe.rep.Collector(), u) {
			other = u
			break
		}
	}
	oc, _ := api.NewClient(other, api.WithTop(1000))
	probe.rec.Record(meter.Record{Tags: tenant.Tags{Tenant: "lagprobe", Route: "GET /x"}, Kind: report.KindRequest, RU: 1})
	if err := probe.rep.ForceFlush(ctx); err != nil {
		t.Fatal(err)
	}
	acked := time.Now()
	// It shows once its second is complete; a peer too slow to answer
	// (the snapshot of a second is kept) is asked again the next second,
	// while the report is still in the window.
	seen := false
	for range rateN - 1 {
		r.clk.Add(time.Second)
		snap, err := oc.Get(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, row := range snap.Tenants {
			seen = seen || row.Tenant == "lagprobe"
		}
		if seen {
			break
		}
	}
	if !seen {
		t.Fatal("a report acknowledged by one collector never showed in another's fleet view")
	}
	t.Logf("fleet view lag: a report acknowledged by %s showed in %s's fleet view after %v",
		probe.rep.Collector(), other, time.Since(acked).Round(time.Millisecond))

	// One policy: posted to collector 1, in the replies of all three.
	for _, p := range procs {
		p.rep.Start()
	}
	posted := time.Now()
	rule := policy.Rule{ID: "fleet-throttle", Tenant: "tenant4", Action: policy.Throttle, RUPerSecond: 10,
		Expires: time.Now().Add(time.Hour), Reason: "fleet test"}
	c1, _ := api.NewClient(r.urls[1])
	if _, err := c1.PostPolicy(ctx, rule, fleetToken); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "every process to get the throttle posted to one collector", func() bool {
		for _, p := range procs {
			if !p.hasRule(rule.ID) {
				return false
			}
		}
		return true
	})
	t.Logf("throttle posted to one collector reached all %d processes of 3 collectors in %v (report interval 200ms, policy poll %v)",
		len(procs), time.Since(posted).Round(time.Millisecond), policyPoll)
	for i, s := range r.servers {
		if p := s.Policy(); len(p.Rules) != 1 || p.Rules[0].ID != rule.ID || p.Version < sharedPolicyBase {
			t.Errorf("collector %d policy %+v", i, p)
		}
	}

	// Stop everything: the collectors write their minutes.
	for _, p := range procs {
		if err := p.rep.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range r.servers {
		if err := s.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
	}
	st, err := chstore.Open(ctx, r.addrs[3], r.db, chstore.WithCluster(r.cluster), chstore.WithReplicated())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	audit, err := st.AuditLog(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(audit) != 1 || audit[0].Action != "add" {
		t.Fatalf("audit log %+v: want the one change, once", audit)
	}
	now := time.Now()
	u, err := st.Usage(ctx, now.Add(-time.Hour), now.Add(time.Hour), false)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]uint64{}
	for _, row := range u {
		got[row.Tenant] += row.Requests
	}
	for name, n := range want {
		if got[name] != n {
			t.Errorf("store: %s has %d requests, the processes recorded %d", name, got[name], n)
		}
	}
}

// dyingHandler is a collector that logs a report and dies before its reply
// leaves: from the armed report on, it serves the real handler into a
// recorder (the report is logged and merged), then drops the connection,
// and drops every later one too (the process is gone).
type dyingHandler struct {
	next  http.Handler
	armed atomic.Bool
	dead  atomic.Bool
}

func (d *dyingHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if d.dead.Load() || d.armed.Load() && r.URL.Path == api.PathReports {
		if !d.dead.Load() {
			d.next.ServeHTTP(httptest.NewRecorder(), r) // logged, reply lost
			d.dead.Store(true)
		}
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
		return
	}
	d.next.ServeHTTP(w, r)
}

// TestFleetFailoverAfterLoggedReport measures the stated bound: a
// collector logs a report and dies before replying; the process sends the
// report again, with its Seq, to the next collector, which cannot know the
// first one had it. When the first comes back (on its data folder, from
// its write-ahead log), that one report is in the store twice — and
// nothing else: the bound is one report per process whose report was in
// flight when its collector died (a Reporter sends one report at a time).
func TestFleetFailoverAfterLoggedReport(t *testing.T) {
	name, addrs := testsvc.ClickHouseCluster(t)
	db := fmt.Sprintf("qtop_failover_%d_%d", os.Getpid(), time.Now().UnixNano()%1e6)
	storeURL := "clickhouse://" + strings.Join(addrs, ",") + "/" + db
	t.Cleanup(func() {
		conn, err := clickhouse.Open(&clickhouse.Options{Addr: addrs[:1]})
		if err == nil {
			conn.Exec(context.Background(), "DROP DATABASE IF EXISTS "+db+" ON CLUSTER "+name)
			conn.Close()
		}
	})
	dirA := t.TempDir()
	newServer := func(dir, writer string) *Server {
		s, err := New(Config{Store: storeURL, FleetConfig: FleetConfig{Cluster: name}, DataDir: dir, Writer: writer, Registerer: prometheus.NewRegistry()})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	a, b := newServer(dirA, "a"), newServer(t.TempDir(), "b")
	dying := &dyingHandler{next: a.Handler()}
	ha, hb := httptest.NewServer(dying), httptest.NewServer(b.Handler())
	defer ha.Close()
	defer hb.Close()
	urls := []string{ha.URL + api.PathReports, hb.URL + api.PathReports}
	var src report.Source
	for i := 0; ; i++ { // a process whose first choice is a
		src = report.Source{Service: "api", Instance: fmt.Sprintf("p%d", i)}
		rep, _ := meter.NewReporter(urls[0], newRec(t, meter.WithSource(src)), meter.WithCollectors(urls[1]))
		if rep.Collector() == urls[0] {
			break
		}
	}
	rec := newRec(t, meter.WithSource(src))
	rep, err := meter.NewReporter(urls[0], rec, meter.WithCollectors(urls[1]), meter.WithBackoff(time.Millisecond, 10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const perReport = 7
	var recorded uint64
	for i := range 5 {
		if i == 2 {
			dying.armed.Store(true)
		}
		for range perReport {
			rec.Record(meter.Record{Tags: tenant.Tags{Tenant: "acme", Route: "GET /x"}, Kind: report.KindRequest, RU: 1})
		}
		recorded += perReport
		fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		if err := rep.ForceFlush(fctx); err != nil {
			t.Fatal(err)
		}
		cancel()
	}
	rep.Shutdown(ctx)
	if rep.Collector() != urls[1] {
		t.Fatalf("the process did not fail over: %s", rep.Collector())
	}
	// a "dies" (its minutes unwritten) and comes back on its data folder.
	a.mu.Lock()
	a.minutes.byStart = map[int64]*minute{} // what a SIGKILL loses: only the write-ahead log is left
	a.agg.dropAllMinutes()
	a.mu.Unlock()
	a.Shutdown(ctx)
	a = newServer(dirA, "a")
	for _, s := range []*Server{a, b} {
		if err := s.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
	}
	st, err := chstore.Open(ctx, strings.Join(addrs, ","), db, chstore.WithCluster(name), chstore.WithReplicated())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := time.Now()
	u, err := st.Usage(ctx, now.Add(-time.Hour), now.Add(time.Hour), false)
	if err != nil {
		t.Fatal(err)
	}
	var stored uint64
	for _, row := range u {
		stored += row.Requests
	}
	t.Logf("recorded %d requests in 5 reports of %d; stored %d: doubled %d (the one report logged by the collector that died before replying)",
		recorded, perReport, stored, stored-recorded)
	if stored != recorded+perReport {
		t.Fatalf("stored %d requests, want %d recorded + %d of the one report in flight", stored, recorded, perReport)
	}
}
