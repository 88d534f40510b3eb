package collector

import (
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/qtop-dev/qtop/internal/testsvc"
	"github.com/qtop-dev/qtop/store/chstore"
)

// proxy forwards TCP to the real ClickHouse and can cut the link, so a
// test can take "the store" down without stopping the server other tests
// share.
type proxy struct {
	t      *testing.T
	addr   string
	target string
	mu     sync.Mutex
	ln     net.Listener
	conns  []net.Conn
	wg     sync.WaitGroup
}

func newProxy(t *testing.T, target string) *proxy {
	p := &proxy{t: t, target: target}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.addr = ln.Addr().String()
	p.serve(ln)
	return p
}

func (p *proxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("tcp", p.target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, u)
			p.mu.Unlock()
			p.wg.Add(2)
			go func() { defer p.wg.Done(); io.Copy(u, c); u.Close() }()
			go func() { defer p.wg.Done(); io.Copy(c, u); c.Close() }()
		}
	}()
}

// down closes the listener and every open connection.
func (p *proxy) down() {
	p.mu.Lock()
	p.ln.Close()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
	p.mu.Unlock()
	p.wg.Wait()
}

// up listens again on the same address.
func (p *proxy) up() {
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		p.t.Fatal(err)
	}
	p.serve(ln)
}

// TestClickHouseDownMidRun takes the link to ClickHouse down while minutes
// close, then brings it back: the rows wait in the spool and the store
// ends up with exactly what was acknowledged, nothing lost or doubled.
func TestClickHouseDownMidRun(t *testing.T) {
	addr := testsvc.ClickHouse(t)
	waitClickHouse(t, addr)
	px := newProxy(t, addr)
	defer px.down()
	db := fmt.Sprintf("qtop_col_down_%d", time.Now().UnixNano())
	clk := &clock{t: t0}
	s, err := New(Config{Store: "clickhouse://" + px.addr + "/" + db, DataDir: t.TempDir(), Writer: "w1",
		Registerer: prometheus.NewRegistry(), Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	p := newProcess(clk, "api", "p")
	want := 0.0
	feed := func(n int) {
		for i := range n {
			clk.Add(time.Second)
			if status, _, msg, _, _ := ingest(s, p.report(t, "acme", i+1, "")); status != 200 {
				t.Fatalf("refused: %d %s", status, msg)
			}
			want += float64(i + 1)
		}
	}
	feed(30) // 09:00:11 … 09:00:40
	px.down()
	clk.Set(time.Date(2026, 3, 4, 9, 1, 10, 0, time.UTC))
	s.Tick(ctx, clk.Now()) // 09:00 closes while the store is down
	if rows, _ := s.em.spool.Pending(); rows == 0 {
		t.Fatal("minute not spooled while the store is down")
	}
	feed(30) // 09:01:11 … 09:01:40
	clk.Set(time.Date(2026, 3, 4, 9, 2, 10, 0, time.UTC))
	s.Tick(ctx, clk.Now())
	snap := s.Snapshot(clk.Now(), "ru", 5)
	if snap.Collector.StoreHealthy || snap.Collector.SpoolBytes == 0 {
		t.Fatalf("status while down: %+v", snap.Collector)
	}
	// /readyz needs no credential: the store's error, which names its
	// address, is said only with the read token.
	full := s.em.spool.Stats().Bytes
	if r := s.em.notReady(full, false); len(r) != 1 || strings.Contains(r[0], px.addr) {
		t.Fatalf("readiness without the token: %q", r)
	}
	if r := s.em.notReady(full, true); len(r) != 1 || !strings.Contains(r[0], px.addr) {
		t.Fatalf("readiness with the token: %q", r)
	}
	px.up()
	fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := s.em.spool.Flush(fctx); err != nil {
		t.Fatalf("spool did not drain after the store came back: %v", err)
	}
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	st, err := chstore.Open(ctx, addr, db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	us, err := st.Usage(ctx, t0.Add(-time.Hour), t0.Add(time.Hour), false)
	if err != nil {
		t.Fatal(err)
	}
	var got float64
	for _, u := range us {
		got += u.RU
	}
	if got != want {
		t.Fatalf("stored RU %v, acknowledged %v", got, want)
	}
}

// TestClickHouseDownAtStart: a collector whose ClickHouse is down when it
// starts still starts, acknowledges reports and writes them once the
// server answers.
func TestClickHouseDownAtStart(t *testing.T) {
	addr := testsvc.ClickHouse(t)
	waitClickHouse(t, addr)
	px := newProxy(t, addr)
	px.down()
	db := fmt.Sprintf("qtop_col_late_%d", time.Now().UnixNano())
	clk := &clock{t: t0}
	s, err := New(Config{Store: "clickhouse://" + px.addr + "/" + db, DataDir: t.TempDir(), Writer: "w1",
		Registerer: prometheus.NewRegistry(), Now: clk.Now})
	if err != nil {
		t.Fatalf("collector refused to start with its store down: %v", err)
	}
	p := newProcess(clk, "api", "p")
	clk.Add(time.Second)
	if status, _, msg, _, _ := ingest(s, p.report(t, "acme", 9, "")); status != 200 {
		t.Fatalf("refused: %d %s", status, msg)
	}
	ctx := context.Background()
	s.Tick(ctx, time.Date(2026, 3, 4, 9, 1, 10, 0, time.UTC))
	if rows, _ := s.em.spool.Pending(); rows == 0 {
		t.Fatal("minute not spooled")
	}
	px.up()
	defer px.down()
	fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	// The store is opened again at most every retryOpen, on the
	// collector's clock.
	if err := s.em.spool.Flush(fctx); err == nil {
		t.Fatal("the store was opened again before retryOpen")
	}
	clk.Add(retryOpen)
	if err := s.em.spool.Flush(fctx); err != nil {
		t.Fatalf("spool did not drain: %v", err)
	}
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	st, err := chstore.Open(ctx, addr, db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	us, err := st.Usage(ctx, t0.Add(-time.Hour), t0.Add(time.Hour), false)
	if err != nil || len(us) != 1 || us[0].RU != 9 {
		t.Fatalf("usage %+v %v", us, err)
	}
}
