package pgactivity

import (
	"fmt"
	"math"
	"sync"
	"testing"
	"time"
)

var t0 = time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)

func at(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }

// act is an active backend of tenant ten, running since start second s0,
// seen at second now, waiting on wait ("" for CPU).
func act(pid int32, ten string, s0, now int, wait string) Backend {
	return Backend{PID: pid, Tenant: ten, Route: fmt.Sprintf("r%d", pid%2), State: StateActive, WaitEventType: wait,
		QueryStart: at(s0), Duration: at(now).Sub(at(s0)), Query: fmt.Sprintf("q%d@%d", pid, s0)}
}

func idle(pid int32, ten string) Backend {
	return Backend{PID: pid, Tenant: ten, State: StateIdle}
}

func load(w Window, ten string) TenantLoad {
	for _, l := range w.Tenants {
		if l.Tenant == ten {
			return l
		}
	}
	return TenantLoad{Tenant: ten}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// TestAggregatorSteps walks one window of four samples on fixed instants.
func TestAggregatorSteps(t *testing.T) {
	a := NewAggregator()
	steps := []Snapshot{
		{Time: at(1), Backends: []Backend{act(1, "a", 0, 1, ""), act(2, "a", 1, 1, "IO"), act(3, "b", 0, 1, ""), idle(4, "b")}},
		{Time: at(2), Backends: []Backend{act(1, "a", 0, 2, ""), act(2, "a", 2, 2, "IO"), idle(3, "b"), act(5, "", 2, 2, "Lock")}},
		{Time: at(3), Backends: []Backend{act(1, "a", 0, 3, "LWLock"), idle(2, "a"), act(5, "", 2, 3, "Lock")}},
		{Time: at(4), Backends: []Backend{idle(1, "a"), act(6, "b", 4, 4, "")}},
	}
	for _, s := range steps {
		a.Add(s)
	}
	w := a.Cut(at(5))
	if !w.Start.Equal(at(1)) || !w.End.Equal(at(5)) || w.Samples != 4 {
		t.Fatalf("window %v–%v, %d samples", w.Start, w.End, w.Samples)
	}
	// a: 2 + 2 + 1 + 0 active = 5 over 4 samples.
	la := load(w, "a")
	if !near(la.AAS, 1.25) || !near(la.Waits[WaitCPU], 0.5) || !near(la.Waits["IO"], 0.5) || !near(la.Waits["LWLock"], 0.25) {
		t.Errorf("a: %+v", la)
	}
	// pid 1 ran one statement; pid 2 ran two (query_start 1 and 2).
	if la.Statements != 3 || la.Longest != 3*time.Second {
		t.Errorf("a: statements %d, longest %v", la.Statements, la.Longest)
	}
	lb := load(w, "b")
	if !near(lb.AAS, 0.5) || !near(lb.Waits[WaitCPU], 0.5) || lb.Statements != 2 || lb.Longest != time.Second {
		t.Errorf("b: %+v", lb)
	}
	lu := load(w, "")
	if !near(lu.AAS, 0.5) || !near(lu.Waits["Lock"], 0.5) || lu.Statements != 1 || lu.Longest != time.Second {
		t.Errorf("untagged: %+v", lu)
	}
	if len(w.Tenants) != 3 || w.Tenants[0].Tenant != "a" || w.Tenants[1].Tenant != "" || w.Tenants[2].Tenant != "b" {
		t.Errorf("order: %+v", w.Tenants)
	}
	// a's routes: pid 1 (r1) active 3 times, pid 2 (r0) twice.
	if !near(la.Routes["r1"], 0.75) || !near(la.Routes["r0"], 0.5) || len(la.Routes) != 2 {
		t.Errorf("a's routes: %v", la.Routes)
	}
	for _, l := range w.Tenants {
		for what, m := range map[string]map[string]float64{"waits": l.Waits, "routes": l.Routes} {
			sum := 0.0
			for _, v := range m {
				sum += v
			}
			if !near(sum, l.AAS) {
				t.Errorf("%q: %s add to %v, AAS %v", l.Tenant, what, sum, l.AAS)
			}
		}
	}
	// Longest: pid 1 (3 s), pid 3 (1 s), pid 5 (1 s), pid 2's statements (0 s), pid 6 (0 s).
	var got []string
	for _, b := range w.Longest {
		got = append(got, fmt.Sprintf("%d:%v", b.PID, b.Duration))
	}
	want := "[1:3s 3:1s 5:1s 2:0s 2:0s 6:0s]"
	if fmt.Sprint(got) != want {
		t.Errorf("longest %v, want %s", got, want)
	}

	// The next window starts at the cut and holds nothing yet.
	w2 := a.Cut(at(6))
	if !w2.Start.Equal(at(5)) || w2.Samples != 0 || len(w2.Tenants) != 0 || len(w2.Longest) != 0 {
		t.Errorf("empty window: %+v", w2)
	}
	// A statement still running in a new window counts there again.
	a.Add(Snapshot{Time: at(7), Backends: []Backend{act(1, "a", 0, 7, "")}})
	w3 := a.Cut(at(8))
	if l := load(w3, "a"); !near(l.AAS, 1) || l.Statements != 1 || l.Longest != 7*time.Second {
		t.Errorf("third window: %+v", l)
	}
}

func TestAggregatorCutBeforeAnySample(t *testing.T) {
	a := NewAggregator()
	w := a.Cut(at(3))
	if !w.Start.Equal(at(3)) || !w.End.Equal(at(3)) || w.Samples != 0 || w.Tenants != nil || w.Longest != nil || w.Blocked != nil {
		t.Errorf("%+v", w)
	}
}

// TestAggregatorClockBackwards: a snapshot stamped before the window start
// still counts; AAS is a mean over samples, not over wall time.
func TestAggregatorClockBackwards(t *testing.T) {
	a := NewAggregator()
	a.Add(Snapshot{Time: at(10), Backends: []Backend{act(1, "a", 9, 10, "")}})
	a.Add(Snapshot{Time: at(5), Backends: []Backend{act(2, "a", 4, 5, ""), act(3, "a", 4, 5, "")}})
	w := a.Cut(at(11))
	if l := load(w, "a"); !near(l.AAS, 1.5) || l.Statements != 3 || w.Samples != 2 {
		t.Errorf("%+v, %d samples", l, w.Samples)
	}
}

func TestAggregatorLateObservationKeepsLongest(t *testing.T) {
	a := NewAggregator()
	a.Add(Snapshot{Time: at(9), Backends: []Backend{act(1, "a", 0, 9, "")}})
	a.Add(Snapshot{Time: at(3), Backends: []Backend{act(1, "a", 0, 3, "")}})
	w := a.Cut(at(10))
	if len(w.Longest) != 1 || w.Longest[0].Duration != 9*time.Second || load(w, "a").Statements != 1 {
		t.Errorf("%+v", w.Longest)
	}
}

func TestAggregatorLongestBounded(t *testing.T) {
	a := NewAggregator()
	// 100 statements, one after another on the same two pids, and 30 pids
	// running at the last sample.
	for i := range 100 {
		a.Add(Snapshot{Time: at(i + 1), Backends: []Backend{act(1, "a", i, i+1, ""), act(2, "b", i, i+1, "")}})
	}
	var last []Backend
	for p := range int32(30) {
		last = append(last, act(100+p, "c", 50-int(p), 101, ""))
	}
	a.Add(Snapshot{Time: at(101), Backends: last})
	w := a.Cut(at(102))
	if len(w.Longest) != MaxLongest {
		t.Fatalf("%d longest", len(w.Longest))
	}
	// pid 100+p started at second 50-p: at 101 it has run 51+p s.
	for i, b := range w.Longest {
		if b.PID != 129-int32(i) || b.Duration != time.Duration(80-i)*time.Second {
			t.Errorf("#%d: pid %d %v", i, b.PID, b.Duration)
		}
	}
	if l := load(w, "a"); l.Statements != 100 || l.Longest != time.Second {
		t.Errorf("a: %+v", l)
	}
	if len(a.done) != 0 || len(a.current) != 0 {
		t.Errorf("state kept after cut: %d done, %d current", len(a.done), len(a.current))
	}
}

func TestAggregatorBlocked(t *testing.T) {
	a := NewAggregator()
	holder := Backend{PID: 10, Tenant: "holder", State: StateIdleInTransaction, WaitEventType: "Client", WaitEvent: "ClientRead", QueryStart: at(0)}
	w1 := act(11, "waiter", 1, 2, "Lock")
	w1.BlockedBy = []int32{10}
	w2 := act(12, "other", 1, 2, "Lock")
	w2.BlockedBy = []int32{10, 99} // 99 is not in the snapshot
	a.Add(Snapshot{Time: at(2), Backends: []Backend{holder, w1, w2}})
	w1b := act(11, "waiter", 1, 3, "Lock")
	w1b.BlockedBy = []int32{10}
	a.Add(Snapshot{Time: at(3), Backends: []Backend{holder, w1b}})
	w := a.Cut(at(4))
	var got []string
	for _, p := range w.Blocked {
		got = append(got, fmt.Sprintf("%d(%s,%v)<-%d(%s,%s)", p.Blocked.PID, p.Blocked.Tenant, p.Blocked.Duration, p.Blocking.PID, p.Blocking.Tenant, p.Blocking.State))
	}
	want := "[11(waiter,2s)<-10(holder,idle in transaction) 12(other,1s)<-10(holder,idle in transaction) 12(other,1s)<-99(,)]"
	if fmt.Sprint(got) != want {
		t.Errorf("blocked\n got %v\nwant %s", got, want)
	}
	if w.BlockedOmitted != 0 {
		t.Errorf("omitted %d", w.BlockedOmitted)
	}
	if w := a.Cut(at(5)); w.Blocked != nil {
		t.Errorf("pairs kept after cut: %v", w.Blocked)
	}
}

func TestAggregatorBlockedBounded(t *testing.T) {
	a := NewAggregator()
	var bs []Backend
	for p := range int32(MaxBlocked + 5) {
		b := act(1000+p, "w", 0, 1, "Lock")
		b.BlockedBy = []int32{1}
		bs = append(bs, b)
	}
	a.Add(Snapshot{Time: at(1), Backends: bs})
	a.Add(Snapshot{Time: at(2), Backends: bs[:10]}) // known pairs update, not omitted
	w := a.Cut(at(3))
	if len(w.Blocked) != MaxBlocked || w.BlockedOmitted != 5 {
		t.Errorf("%d pairs, %d omitted", len(w.Blocked), w.BlockedOmitted)
	}
}

func TestAggregatorHidden(t *testing.T) {
	a := NewAggregator()
	h := Backend{PID: 7, Query: HiddenQuery}
	a.Add(Snapshot{Time: at(1), Backends: []Backend{h, h}, Hidden: 2})
	a.Add(Snapshot{Time: at(2), Backends: []Backend{h}, Hidden: 1})
	w := a.Cut(at(3))
	if w.Hidden != 2 || len(w.Tenants) != 0 {
		t.Errorf("%+v", w)
	}
}

// TestAggregatorConcurrent is for the race detector: Add and Cut from
// several goroutines lose no sample.
func TestAggregatorConcurrent(t *testing.T) {
	a := NewAggregator()
	var wg sync.WaitGroup
	var mu sync.Mutex
	total := 0
	for g := range 4 {
		wg.Go(func() {
			for i := range 200 {
				a.Add(Snapshot{Time: at(i), Backends: []Backend{act(int32(g), "a", 0, i, "")}})
				if i%50 == 0 {
					w := a.Cut(at(i))
					mu.Lock()
					total += w.Samples
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	total += a.Cut(at(1000)).Samples
	if total != 800 {
		t.Errorf("%d samples", total)
	}
}
