package meter

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/qtop-dev/qtop/report"
	"github.com/qtop-dev/qtop/tenant"
)

// TestCollectorsRankBySource: every process has its own order of the
// collectors, the same whatever order they are given in, and a fleet
// spreads over them.
func TestCollectorsRankBySource(t *testing.T) {
	urls := []string{"http://c1:7070/v1/reports", "http://c2:7070/v1/reports", "http://c3:7070/v1/reports"}
	first := map[string]int{}
	for i := range 300 {
		src := report.Source{Service: "api", Instance: fmt.Sprintf("api-%d", i), Host: "h"}
		a, err := newTargets(urls[0], urls[1:], src, 0)
		if err != nil {
			t.Fatal(err)
		}
		b, err := newTargets(urls[2], []string{urls[1], urls[0], urls[2]}, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(a.urls, b.urls) || len(a.urls) != 3 {
			t.Fatalf("source %v ranks %v and %v: the order depends on how the list was given", src, a.urls, b.urls)
		}
		first[a.urls[0]]++
	}
	for _, u := range urls {
		if n := first[u]; n < 60 || n > 140 {
			t.Errorf("%s is the first choice of %d of 300 processes; want about 100: %v", u, n, first)
		}
	}
}

func TestCollectorsInvalid(t *testing.T) {
	rec := mustRecorder()
	many := make([]string, MaxCollectors)
	for i := range many {
		many[i] = fmt.Sprintf("http://c%d/v1/reports", i)
	}
	for name, opts := range map[string][]ReporterOption{
		"bad url":        {WithCollectors("ftp://x/")},
		"no host":        {WithCollectors("http:///v1/reports")},
		"too many":       {WithCollectors(many...)},
		"negative delay": {WithFailback(-time.Second)},
	} {
		if _, err := NewReporter("http://c0/v1/reports", rec, opts...); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
}

// sourcePreferring returns a source whose first choice among urls is
// urls[want].
func sourcePreferring(t *testing.T, urls []string, want int) report.Source {
	t.Helper()
	for i := range 1000 {
		src := report.Source{Service: "api", Instance: fmt.Sprintf("i-%d", i), Host: "h"} // all three set: the recorder fills in none
		tg, _ := newTargets(urls[0], urls[1:], src, 0)
		if tg.urls[0] == urls[want] {
			return src
		}
	}
	t.Fatal("no source prefers it")
	return report.Source{}
}

// TestReporterFailsOver: the process's collector goes down (connections
// dropped, then 503s); its reports go to the next collector with their
// Seq, none lost or sent twice; after the failback delay, on the
// reporter's clock, it returns to its first choice, not a moment before.
func TestReporterFailsOver(t *testing.T) {
	a, b := newCollector(t), newCollector(t)
	urls := []string{a.srv.URL + "/v1/reports", b.srv.URL + "/v1/reports"}
	rec := mustRecorder(WithSource(sourcePreferring(t, urls, 0)))
	reg := prometheus.NewPedanticRegistry()
	clk := &stepClock{now: time.Now()} // after the recorder's start: windows do not end before they start
	const failback = 200 * time.Millisecond
	r, err := NewReporter(urls[1], rec, WithCollectors(urls[0]), WithHTTPClient(&http.Client{}), WithClock(clk.Now),
		WithBackoff(time.Millisecond, 20*time.Millisecond), WithFailback(failback), WithRegisterer(reg))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Shutdown(ctxTimeout(t, time.Second))
	if r.Collector() != urls[0] {
		t.Fatalf("first choice %s, want %s", r.Collector(), urls[0])
	}
	send := func(n int) {
		rec.Record(Record{Tags: tenant.Tags{Tenant: "t", Route: "r"}, Duration: time.Duration(n) * time.Millisecond})
		if err := r.ForceFlush(ctxTimeout(t, 10*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	send(1)
	a.setMode("down")
	send(2)
	a.setMode("garbage500")
	send(3)
	if r.Collector() != urls[1] {
		t.Fatalf("after failing over the reporter sends to %s", r.Collector())
	}
	if got := testutil.ToFloat64(r.m.failovers); got != 1 {
		t.Errorf("%v failovers counted, want 1", got)
	}
	a.setMode("ok")
	clk.advance(failback - 1)
	if r.Collector() != urls[1] {
		t.Fatalf("1 ns before the failback delay the reporter sends to %s, want %s", r.Collector(), urls[1])
	}
	clk.advance(1)
	if r.Collector() != urls[0] {
		t.Fatalf("after the failback delay the reporter sends to %s, want its first choice %s", r.Collector(), urls[0])
	}
	send(4)
	seen := map[uint64]int{}
	for _, rep := range append(a.got(), b.got()...) {
		seen[rep.Seq]++
	}
	// a kept the reports it decoded before failing (garbage500 logs them):
	// only Seq 3 may have reached both, and the collectors drop it by Seq.
	for seq := uint64(1); seq <= 4; seq++ {
		if seen[seq] == 0 {
			t.Errorf("report %d reached no collector: a %v, b %v", seq, seqs(a.got()), seqs(b.got()))
		}
	}
	if got := seqs(b.got()); len(got) == 0 || slices.Contains(got, 1) || slices.Contains(got, 4) {
		t.Errorf("b got %v: want the reports sent while a was down only", got)
	}
	if got := seqs(a.got()); !slices.Contains(got, 1) || !slices.Contains(got, 4) {
		t.Errorf("a got %v: want 1 (before) and 4 (after failback)", got)
	}
}

// stepClock is a clock that moves only when the test says.
type stepClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *stepClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *stepClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}
