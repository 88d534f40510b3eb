package spacesaving

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"unsafe"
)

// exact is the oracle: true counts of a stream.
type exact map[string]uint64

func (e exact) total() uint64 {
	var t uint64
	for _, v := range e {
		t += v
	}
	return t
}

// check verifies the guarantees of the package doc for s against e, and
// the sketch's internal consistency.
func check(t *testing.T, s *Sketch, e exact) {
	t.Helper()
	checkInternal(t, s)
	if got, want := s.Total(), e.total(); got != want {
		t.Fatalf("Total = %d, want %d", got, want)
	}
	top := s.Top(-1)
	if len(top) != s.Len() || len(top) > s.Capacity() {
		t.Fatalf("Top(-1) has %d counters; Len %d, capacity %d", len(top), s.Len(), s.Capacity())
	}
	monitored := make(map[string]bool, len(top))
	for i, c := range top {
		if i > 0 && top[i-1].Count < c.Count {
			t.Fatalf("Top not by Count descending at %d: %d < %d", i, top[i-1].Count, c.Count)
		}
		if monitored[c.Key] {
			t.Fatalf("key %q monitored twice", c.Key)
		}
		monitored[c.Key] = true
		tc := e[c.Key]
		if c.Count < tc {
			t.Fatalf("key %q: Count %d < true %d", c.Key, c.Count, tc)
		}
		if c.Count-c.Err > tc {
			t.Fatalf("key %q: Count−Err %d > true %d", c.Key, c.Count-c.Err, tc)
		}
		if c.Err > c.Count {
			t.Fatalf("key %q: Err %d > Count %d", c.Key, c.Err, c.Count)
		}
	}
	k := uint64(s.Capacity())
	for key, tc := range e {
		if tc*k > s.Total() && !monitored[key] {
			t.Fatalf("key %q with true count %d > N/k = %d/%d is not monitored", key, tc, s.Total(), k)
		}
		count, errb, ok := s.Estimate(key)
		if ok != monitored[key] {
			t.Fatalf("Estimate(%q) ok = %v, monitored %v", key, ok, monitored[key])
		}
		if count < tc || count-errb > tc {
			t.Fatalf("Estimate(%q) = %d±%d, true %d", key, count, errb, tc)
		}
	}
}

// checkInternal verifies the heap order, the index and the filter
// invariant: no bucket exceeds any monitored count.
func checkInternal(t *testing.T, s *Sketch) {
	t.Helper()
	if s.heap == nil {
		return
	}
	for p := 1; p < len(s.heap); p++ {
		if q := (p - 1) / 2; s.heap[q].count > s.heap[p].count {
			t.Fatalf("heap order broken at %d", p)
		}
	}
	used := 0
	for i, e := range s.index {
		if e == 0 {
			continue
		}
		used++
		p := int(uint32(e)) - 1
		if p >= len(s.heap) || s.heap[p].slot != uint32(i) || s.heap[p].hash&^0xffffffff != e&^0xffffffff {
			t.Fatalf("index slot %d points at %d inconsistently", i, p)
		}
	}
	if used != len(s.heap) {
		t.Fatalf("index holds %d entries, heap %d", used, len(s.heap))
	}
	for p := range s.heap {
		c := &s.heap[p]
		if c.hash != hashKey(c.key) {
			t.Fatalf("stale hash for %q", c.key)
		}
		if s.find(c.key, c.hash) != p {
			t.Fatalf("find(%q) != %d", c.key, p)
		}
	}
	if len(s.heap) > 0 {
		if a := s.maxAlpha(); a > s.heap[0].count {
			t.Fatalf("bucket %d exceeds the minimum count %d", a, s.heap[0].count)
		}
	}
}

type event struct {
	key    string
	weight uint64
}

func zipfStream(seed uint64, n, keys int, s float64, weighted bool) []event {
	r := rand.New(rand.NewPCG(seed, 1))
	z := rand.NewZipf(r, s, 1, uint64(keys-1))
	names := make([]string, keys)
	for i := range names {
		names[i] = fmt.Sprintf("k%d", i)
	}
	out := make([]event, n)
	for i := range out {
		w := uint64(1)
		if weighted {
			w = 1 + r.Uint64N(100)
		}
		out[i] = event{names[z.Uint64()], w}
	}
	return out
}

// adversarial streams for Space-Saving: every new key evicts, heavy keys
// arrive last or in bursts, weights of one-off keys are huge.
func adversarialStreams() map[string][]event {
	m := map[string][]event{}
	var ev []event
	for i := range 5000 {
		ev = append(ev, event{fmt.Sprintf("once-%d", i), 1})
	}
	for range 300 {
		ev = append(ev, event{"late-heavy", 1})
	}
	m["distinct then heavy"] = ev

	ev = nil
	for i := range 20000 {
		ev = append(ev, event{fmt.Sprintf("r%d", i%150), 1}) // 150 keys round robin, more than capacity
		if i%7 == 0 {
			ev = append(ev, event{"steady", 1})
		}
	}
	m["round robin above capacity"] = ev

	ev = nil
	for i := range 3000 {
		ev = append(ev, event{fmt.Sprintf("big-once-%d", i), 1 << 20})
		ev = append(ev, event{"small-steady", 3})
	}
	ev = append(ev, event{"burst", 1 << 40})
	m["huge one-off weights"] = ev

	ev = nil
	for phase := range 10 {
		for i := range 2000 {
			ev = append(ev, event{fmt.Sprintf("p%d-%d", phase, i%40), 1})
		}
	}
	m["shifting hot set"] = ev
	return m
}

func feed(s *Sketch, ev []event) exact {
	e := exact{}
	for _, x := range ev {
		s.Add(x.key, x.weight)
		e[x.key] += x.weight
	}
	return e
}

func TestGuaranteesZipf(t *testing.T) {
	for _, tc := range []struct {
		s        float64
		capacity int
		weighted bool
	}{
		{1.1, 50, false}, {1.1, 200, true}, {1.5, 20, false}, {1.01, 100, true}, {2, 1, false},
	} {
		t.Run(fmt.Sprintf("s=%v/k=%d/weighted=%v", tc.s, tc.capacity, tc.weighted), func(t *testing.T) {
			s := New(tc.capacity)
			e := feed(s, zipfStream(7, 50000, 20000, tc.s, tc.weighted))
			check(t, s, e)
		})
	}
}

func TestGuaranteesAdversarial(t *testing.T) {
	for name, ev := range adversarialStreams() {
		t.Run(name, func(t *testing.T) {
			for _, k := range []int{1, 10, 100} {
				s := New(k)
				check(t, s, feed(s, ev))
			}
		})
	}
}

func TestRecallZipf(t *testing.T) {
	if testing.Short() {
		t.Skip("long stream")
	}
	// Smaller than the benchmark's 10M events over 1M keys, the same shape.
	ev := zipfStream(11, 1_000_000, 200_000, 1.1, false)
	s := New(200)
	e := feed(s, ev)
	keys := make([]string, 0, len(e))
	for k := range e {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int { return int(e[b]) - int(e[a]) })
	got := map[string]bool{}
	for _, c := range s.Top(100) {
		got[c.Key] = true
	}
	hit := 0
	for _, k := range keys[:100] {
		if got[k] {
			hit++
		}
	}
	if recall := float64(hit) / 100; recall < 0.99 {
		t.Fatalf("recall of the top 100 = %.2f, want ≥ 0.99", recall)
	}
}

func TestMergeGuarantees(t *testing.T) {
	ev := zipfStream(3, 60000, 30000, 1.1, true)
	adv := adversarialStreams()["distinct then heavy"]
	for _, parts := range []int{2, 5, 17} {
		t.Run(fmt.Sprint(parts), func(t *testing.T) {
			all := append(slices.Clone(ev), adv...)
			merged := New(100)
			e := exact{}
			for p := range parts {
				s := New(100)
				for i := p; i < len(all); i += parts {
					s.Add(all[i].key, all[i].weight)
					e[all[i].key] += all[i].weight
				}
				check(t, s, exactOf(all, p, parts))
				merged.Merge(s)
				check(t, merged, e) // after every merge, for the union so far
			}
			// More Adds after merges keep the guarantees.
			tail := zipfStream(4, 20000, 30000, 1.3, false)
			for _, x := range tail {
				merged.Add(x.key, x.weight)
				e[x.key] += x.weight
			}
			check(t, merged, e)
		})
	}
}

func exactOf(ev []event, p, parts int) exact {
	e := exact{}
	for i := p; i < len(ev); i += parts {
		e[ev[i].key] += ev[i].weight
	}
	return e
}

func TestMergeDifferentCapacities(t *testing.T) {
	ev := zipfStream(5, 30000, 5000, 1.2, true)
	a, b := New(10), New(300)
	ea, eb := feed(a, ev[:15000]), feed(b, ev[15000:])
	for k, v := range eb {
		ea[k] += v
	}
	for _, pair := range [][2]*Sketch{{a.Clone(), b}, {b.Clone(), a}} {
		s := pair[0]
		s.Merge(pair[1])
		checkInternal(t, s)
		for _, c := range s.Top(-1) {
			if tc := ea[c.Key]; c.Count < tc || c.Count-c.Err > tc {
				t.Fatalf("capacity %d: key %q = %d±%d, true %d", s.Capacity(), c.Key, c.Count, c.Err, tc)
			}
		}
		if s.Total() != ea.total() {
			t.Fatalf("Total = %d, want %d", s.Total(), ea.total())
		}
	}
}

func TestMergeSelfAndEmpty(t *testing.T) {
	s := New(20)
	e := feed(s, zipfStream(9, 5000, 1000, 1.1, false))
	s.Merge(nil)
	s.Merge(New(20))
	check(t, s, e)
	s.Merge(s)
	for k := range e {
		e[k] *= 2
	}
	check(t, s, e)

	var z Sketch
	z.Merge(s)
	check(t, &z, e)
}

func TestZeroValue(t *testing.T) {
	var s Sketch
	if s.Capacity() != DefaultCapacity || s.Len() != 0 || s.Total() != 0 || len(s.Top(10)) != 0 {
		t.Fatal("zero Sketch is not an empty sketch of DefaultCapacity")
	}
	if _, _, ok := s.Estimate("x"); ok {
		t.Fatal("zero Sketch estimates a key")
	}
	s.Reset()
	s.Add("a", 2)
	check(t, &s, exact{"a": 2})
	if c := s.Clone(); c.Capacity() != DefaultCapacity {
		t.Fatal("clone of a zero sketch")
	}
}

func TestNewPanicsOnBadCapacity(t *testing.T) {
	for _, k := range []int{0, -1, MaxCapacity + 1} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("New(%d) did not panic", k)
				}
			}()
			New(k)
		}()
	}
}

func TestZeroWeight(t *testing.T) {
	s := New(2)
	s.Add("a", 0)
	if s.Len() != 0 || s.Total() != 0 {
		t.Fatal("a zero weight changed the sketch")
	}
}

func TestResetAndClone(t *testing.T) {
	s := New(30)
	e := feed(s, zipfStream(1, 10000, 3000, 1.1, true))
	c := s.Clone()
	s.Reset()
	check(t, s, exact{})
	check(t, c, e)
	s.Add("x", 5)
	check(t, c, e) // independent
	check(t, s, exact{"x": 5})
}

func TestTopOrderAndBounds(t *testing.T) {
	s := New(10)
	s.Add("b", 5)
	s.Add("a", 5)
	s.Add("c", 9)
	got := s.Top(10)
	want := []Counter{{"c", 9, 0}, {"a", 5, 0}, {"b", 5, 0}}
	if !slices.Equal(got, want) {
		t.Fatalf("Top = %v, want %v", got, want)
	}
	if got := s.Top(1); len(got) != 1 || got[0].Key != "c" {
		t.Fatalf("Top(1) = %v", got)
	}
	if got := s.Top(0); len(got) != 0 {
		t.Fatalf("Top(0) = %v", got)
	}
}

func TestAddDoesNotAllocate(t *testing.T) {
	ev := zipfStream(2, 20000, 50000, 1.1, false)
	s := New(100)
	feed(s, ev)
	i := 0
	allocs := testing.AllocsPerRun(10000, func() {
		x := ev[i%len(ev)]
		s.Add(x.key, x.weight)
		i++
	})
	if allocs != 0 {
		t.Fatalf("Add allocates %v times", allocs)
	}
}

// The memory of a sketch, keys aside (they are the caller's strings):
// capacity 1000 fits in 150 KB.
func TestFootprint(t *testing.T) {
	for _, tc := range []struct{ k, max int }{{200, 30_000}, {1000, 150_000}} {
		s := New(tc.k)
		size := cap(s.heap)*int(unsafe.Sizeof(counter{})) + 8*len(s.index) + 8*len(s.alpha) + int(unsafe.Sizeof(*s))
		t.Logf("capacity %d: %d bytes", tc.k, size)
		if size > tc.max {
			t.Errorf("capacity %d takes %d bytes, budget %d", tc.k, size, tc.max)
		}
	}
}
