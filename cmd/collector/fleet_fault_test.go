package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/qtop-dev/qtop/internal/testsvc"
	"github.com/qtop-dev/qtop/meter"
	wire "github.com/qtop-dev/qtop/report"
	"github.com/qtop-dev/qtop/store/chstore"
	"github.com/qtop-dev/qtop/tenant"
)

// The fleet fault runs (minutes; not part of the default test run):
//
//	go test ./cmd/collector -run TestFleetFaults -v -fleet.faults=all
//
// Each run starts three `collector serve` processes on the test cluster
// (scripts/services up --cluster), feeds them from -fleet.procs processes
// of known totals for -fleet.duration, injects one fault a third of the
// way in for 15 s, stops everything cleanly and compares, per tenant, what
// the store holds (through the Distributed table) with what the processes
// recorded: rows lost, doubled, and dropped-and-counted.
var (
	faultRuns  = flag.String("fleet.faults", "", "fleet fault runs: all, or some of replica,zookeeper,collector,cut")
	faultDur   = flag.Duration("fleet.duration", 60*time.Second, "length of each fleet fault run")
	faultProcs = flag.Int("fleet.procs", 50, "processes feeding the fleet in the fault runs")
)

const faultToken = "fault-token"

func TestFleetFaults(t *testing.T) {
	if *faultRuns == "" {
		t.Skip("fleet fault runs take minutes; run them with -fleet.faults=all (see fleet_fault_test.go)")
	}
	runs := strings.Split(*faultRuns, ",")
	if *faultRuns == "all" {
		runs = []string{"replica", "zookeeper", "collector", "cut"}
	}
	bin := buildCollector(t)
	for _, name := range runs {
		t.Run(name, func(t *testing.T) { faultRun(t, bin, name) })
	}
}

// cutter is a TCP proxy that can cut every connection and refuse new ones.
type cutter struct {
	ln     net.Listener
	target string
	cut    atomic.Bool
	mu     sync.Mutex
	conns  []net.Conn
}

func newCutter(t *testing.T, target string) *cutter {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &cutter{ln: ln, target: target}
	go func() {
		for {
			a, err := ln.Accept()
			if err != nil {
				return
			}
			if c.cut.Load() {
				a.Close()
				continue
			}
			b, err := net.Dial("tcp", target)
			if err != nil {
				a.Close()
				continue
			}
			c.mu.Lock()
			c.conns = append(c.conns, a, b)
			c.mu.Unlock()
			go func() { io.Copy(b, a); b.Close() }()
			go func() { io.Copy(a, b); a.Close() }()
		}
	}()
	t.Cleanup(func() { ln.Close(); c.setCut(true) })
	return c
}

func (c *cutter) setCut(on bool) {
	c.cut.Store(on)
	if on {
		c.mu.Lock()
		for _, x := range c.conns {
			x.Close()
		}
		c.conns = nil
		c.mu.Unlock()
	}
}

// proc is a collector process of the run.
type proc struct {
	args []string
	log  string
	cmd  *exec.Cmd
	base string
}

func (p *proc) start(t *testing.T, bin string) {
	t.Helper()
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	p.cmd = exec.Command(bin, append([]string{"serve", "--log-format", "json", "--log-level", "warn"}, p.args...)...)
	p.cmd.Stdout, p.cmd.Stderr = f, f
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	f.Close()
}

func (p *proc) waitReady(t *testing.T) {
	t.Helper()
	var err error
	up := waitUntil(2*time.Minute, func() bool {
		var resp *http.Response
		if resp, err = http.Get(p.base + "/healthz"); err == nil {
			resp.Body.Close()
		}
		return err == nil
	})
	if !up {
		b, _ := os.ReadFile(p.log)
		t.Fatalf("collector %s did not start: %v\n%s", p.base, err, b)
	}
}

// hold lets the run go on for d: the run's timeline (a third of it
// before the fault, the fault for faultHold, the rest after) is the
// scenario itself, not a wait for something to happen.
func hold(d time.Duration) { <-time.After(d) }

// faultHold is how long each fault lasts.
const faultHold = 15 * time.Second

func (p *proc) stop(t *testing.T) {
	if p.cmd == nil || p.cmd.Process == nil {
		return
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(90 * time.Second):
		p.cmd.Process.Kill()
		<-done
		t.Errorf("collector %s did not stop within 90 s", p.base)
	}
	p.cmd = nil
}

// metric reads one counter from a collector's /metrics (0 when absent).
func (p *proc) metric(name string) float64 {
	resp, err := http.Get(p.base + "/metrics")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	sum := 0.0
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, name) {
			f := strings.Fields(line)
			v, _ := strconv.ParseFloat(f[len(f)-1], 64)
			sum += v
		}
	}
	return sum
}

func services(t *testing.T, args ...string) {
	t.Helper()
	cmd := exec.Command("../../scripts/services", args...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("scripts/services %v: %v\n%s", args, err, out)
	}
}

func faultRun(t *testing.T, bin, fault string) {
	name, addrs := testsvc.ClickHouseCluster(t)
	db := fmt.Sprintf("qtop_fault_%s_%d", fault, time.Now().Unix())
	storeOf := func(addrs ...string) string { return "clickhouse://" + strings.Join(addrs, ",") + "/" + db }
	var cut *cutter
	stores := []string{storeOf(addrs...), storeOf(addrs...), storeOf(addrs...)}
	if fault == "cut" {
		cut = newCutter(t, addrs[2]) // collector 0 reaches the cluster through a node of shard 2 only
		stores[0] = storeOf(cut.ln.Addr().String())
	}
	dir := t.TempDir()
	listen := []string{freePort(t), freePort(t), freePort(t)}
	procs := make([]*proc, 3)
	for i := range procs {
		var peers []string
		for j, l := range listen {
			if j != i {
				peers = append(peers, l)
			}
		}
		procs[i] = &proc{base: "http://" + listen[i], log: filepath.Join(dir, fmt.Sprintf("c%d.log", i)), args: []string{
			"--listen", listen[i], "--store", stores[i], "--cluster", name, "--peers", strings.Join(peers, ","),
			"--shared-policy", "--token", faultToken, "--data-dir", filepath.Join(dir, fmt.Sprintf("c%d", i)),
			"--writer", fmt.Sprintf("c%d", i), "--grace", "2s"}}
		procs[i].start(t, bin)
	}
	for _, p := range procs {
		p.waitReady(t)
		defer p.stop(t)
	}

	// The generator: processes of known totals.
	const ntenants = 10
	var recorded [ntenants]atomic.Int64
	var urls []string
	for _, l := range listen {
		urls = append(urls, "http://"+l+"/v1/reports")
	}
	type gen struct {
		rec *meter.Recorder
		rep *meter.Reporter
		reg *prometheus.Registry
	}
	gens := make([]gen, *faultProcs)
	for i := range gens {
		rec := newRec(t, meter.WithSource(wire.Source{Service: "gen", Instance: fmt.Sprintf("g%03d", i), Host: "h"}))
		reg := prometheus.NewRegistry()
		rep, err := meter.NewReporter(urls[0], rec, meter.WithCollectors(urls[1:]...), meter.WithToken(faultToken),
			meter.WithQueueLen(600), meter.WithBackoff(50*time.Millisecond, 2*time.Second), meter.WithRegisterer(reg))
		if err != nil {
			t.Fatal(err)
		}
		rep.Start()
		gens[i] = gen{rec, rep, reg}
	}
	start := time.Now()
	stopLoad := make(chan struct{})
	var loadWG sync.WaitGroup
	loadWG.Add(1)
	go func() {
		defer loadWG.Done()
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stopLoad:
				return
			case <-tick.C:
			}
			for _, g := range gens {
				for k := range ntenants {
					tags := tenant.Tags{Tenant: fmt.Sprintf("tenant%02d", k), Route: "GET /x"}
					for range k + 1 {
						g.rec.Record(meter.Record{Tags: tags, Kind: wire.KindRequest, Duration: time.Millisecond, RU: 1})
					}
					recorded[k].Add(int64(k + 1))
				}
			}
		}
	}()

	// The load reaches every collector before the fault.
	for _, p := range procs {
		if !waitUntil(time.Minute, func() bool { return p.metric("qtop_collector_reports_total") > 0 }) {
			t.Fatalf("collector %s merged no report", p.base)
		}
	}
	hold(time.Until(start.Add(*faultDur / 3)))
	faultAt := time.Now()
	switch fault {
	case "replica":
		node := addrs[0]
		services(t, "kill", "--cluster-node", strings.Split(node, ":")[1])
		hold(faultHold)
		services(t, "up", "--cluster")
		if !waitUntil(2*time.Minute, func() bool { return dials(node) }) {
			t.Fatalf("cluster node %s did not come back", node)
		}
	case "zookeeper":
		services(t, "kill", "--zookeeper")
		hold(faultHold)
		services(t, "up", "--cluster")
	case "collector":
		procs[1].cmd.Process.Kill()
		procs[1].cmd.Wait()
		procs[1].cmd = nil
		hold(faultHold)
		procs[1].start(t, bin)
		procs[1].waitReady(t)
	case "cut":
		cut.setCut(true)
		hold(faultHold)
		cut.setCut(false)
	}
	t.Logf("%s: fault from %v to %v into the run", fault, faultAt.Sub(start).Round(time.Second), time.Since(start).Round(time.Second))
	hold(time.Until(start.Add(*faultDur)))
	close(stopLoad)
	loadWG.Wait()

	var reportsDropped uint64
	why := map[string]float64{}
	var failovers float64
	for _, g := range gens {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		if err := g.rep.Shutdown(ctx); err != nil {
			t.Logf("reporter: %v", err)
		}
		cancel()
		reportsDropped += g.rep.Dropped()
		mfs, _ := g.reg.Gather()
		for _, mf := range mfs {
			for _, m := range mf.GetMetric() {
				switch mf.GetName() {
				case "qtop_ingest_reports_dropped_total", "qtop_ingest_report_attempts_failed_total":
					if v := m.GetCounter().GetValue(); v > 0 {
						why[mf.GetName()[len("qtop_ingest_"):]+"/"+m.GetLabel()[0].GetValue()] += v
					}
				case "qtop_ingest_report_failovers_total":
					failovers += m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Logf("%s: reporters: failovers %v, %v", fault, failovers, why)
	var rowsDropped, dupReports float64
	for _, p := range procs {
		rowsDropped += p.metric("qtop_collector_dropped_rows_total")
		dupReports += p.metric("qtop_collector_reports_duplicate_total")
	}
	for _, p := range procs {
		p.stop(t)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, a := range addrs {
		conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{a}})
		if err != nil {
			t.Fatal(err)
		}
		if err := conn.Exec(ctx, "SYSTEM SYNC REPLICA "+db+".rollups"); err != nil {
			t.Fatalf("sync replica on %s: %v", a, err)
		}
		conn.Close()
	}
	st, err := chstore.Open(ctx, strings.Join(addrs, ","), db, chstore.WithCluster(name), chstore.WithReplicated())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	defer func() {
		conn, err := clickhouse.Open(&clickhouse.Options{Addr: addrs[:1]})
		if err == nil {
			conn.Exec(context.Background(), "DROP DATABASE IF EXISTS "+db+" ON CLUSTER "+name)
			conn.Close()
		}
	}()
	u, err := st.Usage(ctx, start.Add(-2*time.Hour), time.Now().Add(time.Hour), false)
	if err != nil {
		t.Fatal(err)
	}
	stored := map[string]int64{}
	for _, row := range u {
		stored[row.Tenant] += int64(row.Requests)
	}
	var lost, doubled, total, storedTotal int64
	for k := range ntenants {
		want, got := recorded[k].Load(), stored[fmt.Sprintf("tenant%02d", k)]
		total += want
		storedTotal += got
		if got < want {
			lost += want - got
		} else {
			doubled += got - want
		}
	}
	t.Logf("FAULT %-9s procs=%d duration=%v recorded=%d stored=%d lost=%d doubled=%d reports_dropped=%d rows_dropped=%v duplicate_reports=%v",
		fault, *faultProcs, *faultDur, total, storedTotal, lost, doubled, reportsDropped, rowsDropped, dupReports)
	if reportsDropped == 0 && rowsDropped == 0 && lost != 0 {
		t.Errorf("%s: %d requests lost and nothing counted as dropped", fault, lost)
	}
	if doubled != 0 {
		t.Errorf("%s: %d requests doubled", fault, doubled)
	}
}
