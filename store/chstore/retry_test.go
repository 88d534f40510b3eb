package chstore

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"

	"github.com/qtop-dev/qtop/internal/testsvc"
	"github.com/qtop-dev/qtop/store"
	"github.com/qtop-dev/qtop/store/storetest"
)

// cutProxy forwards TCP between the client and ClickHouse. Armed, it waits
// until a connection has sent `after` more bytes to the server (the insert's
// data block is under way), then either cuts at once (the upload is lost)
// or forwards the rest of the upload but swallows the reply and cuts a
// moment later (the insert is committed, the client never hears so).
type cutProxy struct {
	ln       net.Listener
	target   string
	armed    atomic.Bool
	after    int64
	keepSend bool // true: cut after the reply; false: cut during the upload
	cuts     atomic.Int64
	wg       sync.WaitGroup
	mu       sync.Mutex
	conns    []net.Conn
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, target: target}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *cutProxy) addr() string { return p.ln.Addr().String() }

func (p *cutProxy) close() {
	p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *cutProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		var swallow atomic.Bool
		cut := func() {
			p.cuts.Add(1)
			c.Close()
			s.Close()
		}
		p.wg.Add(2)
		go func() { // client → server
			defer p.wg.Done()
			var sent int64
			buf := make([]byte, 32<<10)
			for {
				n, err := c.Read(buf)
				if n > 0 {
					if p.armed.Load() {
						sent += int64(n)
						if sent >= p.after && p.armed.CompareAndSwap(true, false) {
							if !p.keepSend {
								cut()
								return
							}
							swallow.Store(true)
							time.AfterFunc(time.Second, cut)
						}
					}
					if _, werr := s.Write(buf[:n]); werr != nil {
						return
					}
				}
				if err != nil {
					s.Close()
					return
				}
			}
		}()
		go func() { // server → client
			defer p.wg.Done()
			buf := make([]byte, 32<<10)
			for {
				n, err := s.Read(buf)
				if n > 0 && !swallow.Load() {
					if _, werr := c.Write(buf[:n]); werr != nil {
						return
					}
				}
				if err != nil {
					c.Close()
					return
				}
			}
		}()
	}
}

func bigBatch(n int) []store.Rollup {
	rows := make([]store.Rollup, n)
	for i := range rows {
		rows[i] = storetest.Row(i%60, "w1", fmt.Sprintf("tenant-%05d", i), fmt.Sprintf("/route/%d", i%17), uint64(i%1000+1))
	}
	return rows
}

func rawCount(t *testing.T, conn clickhouse.Conn, db string) uint64 {
	t.Helper()
	var n uint64
	if err := conn.QueryRow(context.Background(), fmt.Sprintf("SELECT count() FROM %s.rollups", db)).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestRetryAfterDroppedLink proves on the real server what CLICKHOUSE.md
// measured: a batch whose reply is lost is committed although the write
// failed, so its retry stores it twice — and that reads still count it once.
// The upload-lost case commits nothing and the retry stores it once.
func TestRetryAfterDroppedLink(t *testing.T) {
	for _, keepSend := range []bool{true, false} {
		name := map[bool]string{true: "reply lost", false: "upload lost"}[keepSend]
		t.Run(name, func(t *testing.T) {
			direct, addr, db := openTest(t)
			p := newCutProxy(t, addr)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			s, err := Open(ctx, p.addr(), db, WithMaxConns(1))
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			// Keep the parts apart so the duplicate stays visible on disk.
			merging := direct.conn.Exec(ctx, "SYSTEM STOP MERGES "+db+".rollups")
			if merging != nil {
				t.Logf("cannot stop merges (%v); the raw count may already be merged", merging)
			}
			const n = 20000
			batch := bigBatch(n)
			p.after, p.keepSend = 8<<10, keepSend
			p.armed.Store(true)
			err = s.WriteRollups(ctx, batch)
			if err == nil {
				t.Fatalf("the write through a cut link succeeded (cuts %d)", p.cuts.Load())
			}
			t.Logf("first write failed as the client sees it: %v", err)

			want := uint64(0)
			if keepSend {
				want = n
			}
			testsvc.Poll(30*time.Second, func() bool { return rawCount(t, direct.conn, db) == want })
			if got := rawCount(t, direct.conn, db); got != want {
				t.Fatalf("after the cut the table holds %d rows, want %d", got, want)
			}

			if err := s.WriteRollups(ctx, batch); err != nil { // the retry
				t.Fatalf("retry: %v", err)
			}
			raw := rawCount(t, direct.conn, db)
			t.Logf("rows on disk after the retry: %d (batch %d)", raw, n)
			if keepSend && merging == nil && raw != 2*n {
				t.Fatalf("the retry after a lost reply left %d rows on disk, want %d: the scenario did not happen", raw, 2*n)
			}
			if !keepSend && raw != n {
				t.Fatalf("upload-lost retry left %d rows on disk, want %d", raw, n)
			}
			from, to := storetest.T0, storetest.T0.Add(time.Hour)
			for _, byRoute := range []bool{false, true} {
				u, err := s.Usage(ctx, from, to, byRoute)
				if err != nil {
					t.Fatal(err)
				}
				storetest.CheckUsage(t, u, storetest.ExpectUsage(batch, from, to, byRoute))
			}
			h, err := s.History(ctx, "tenant-00042", from, to)
			if err != nil {
				t.Fatal(err)
			}
			storetest.CheckHistory(t, h, storetest.ExpectHistory(batch, "tenant-00042", from, to))
			direct.conn.Exec(ctx, "SYSTEM START MERGES "+db+".rollups")
			if err := direct.conn.Exec(ctx, "OPTIMIZE TABLE "+db+".rollups FINAL"); err != nil {
				t.Fatal(err)
			}
			if got := rawCount(t, direct.conn, db); got != n {
				t.Fatalf("after the merge the table holds %d rows, want %d", got, n)
			}
		})
	}
}
