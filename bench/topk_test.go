package bench

// Heavy hitters side by side: qtop's spacesaving (filtered Space-Saving)
// against github.com/dgryski/go-topk (filtered Space-Saving, map + heap)
// and github.com/segmentio/topk (HeavyKeeper), with an exact map as the
// baseline. The stream is Zipf(s = 1.1) over 1M string keys, 10M events,
// generated once with a fixed seed. Run: ./run -bench TopK
//
// BenchmarkTopKUpdate     one update of a warm sketch (ns/op, allocs/op), capacity 200 and 1000
// BenchmarkTopKRecall     the whole 10M-event stream into a fresh sketch: ns/update and
//                         recall of the true top 100 among the sketch's top 100 (recall@100)
// BenchmarkTopKParallel   qtop's Concurrent against go-topk behind a mutex, serial and
//                         with GOMAXPROCS goroutines (ns per update)
// BenchmarkTopKInterleaved all contenders warm, fed the same chunks of the stream in
//                         turn (rotating the order), so that the load of a shared machine
//                         falls on all alike: ns/update of each, and qtop's over each peer's

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gotopk "github.com/dgryski/go-topk"
	hk "github.com/segmentio/topk"

	"github.com/qtop-dev/qtop/spacesaving"
)

const (
	topkKeys   = 1_000_000
	topkEvents = 10_000_000
	topkRecall = 100
)

type topkStream struct {
	keys   []string
	events []uint32
	truth  []string // the true top 100, heaviest first
}

var zipfKeys = sync.OnceValue(func() *topkStream {
	r := rand.New(rand.NewPCG(2005, 1)) // Metwally et al.
	z := rand.NewZipf(r, 1.1, 1, topkKeys-1)
	st := &topkStream{keys: make([]string, topkKeys), events: make([]uint32, topkEvents)}
	// Scatter ranks over key names so that the heaviest keys are not
	// "k0", "k1", … (no implementation gets lucky with short keys).
	perm := r.Perm(topkKeys)
	for i := range st.keys {
		st.keys[i] = fmt.Sprintf("tenant-%07d", perm[i])
	}
	counts := make([]uint32, topkKeys)
	for i := range st.events {
		k := uint32(z.Uint64())
		st.events[i] = k
		counts[k]++
	}
	idx := make([]int, topkKeys)
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int { return int(counts[b]) - int(counts[a]) })
	for _, i := range idx[:topkRecall] {
		st.truth = append(st.truth, st.keys[i])
	}
	runtime.GC() // not in the first benchmark's time
	return st
})

// heavyHitters is the common shape of the topkContenders.
type heavyHitters interface {
	add(key string)
	top(n int) []string
}

type qtopSS struct{ s *spacesaving.Sketch }

func (q qtopSS) add(k string) { q.s.Add(k, 1) }
func (q qtopSS) top(n int) []string {
	var out []string
	for _, c := range q.s.Top(n) {
		out = append(out, c.Key)
	}
	return out
}

type goTopK struct{ s *gotopk.Stream }

func (g goTopK) add(k string) { g.s.Insert(k, 1) }
func (g goTopK) top(n int) []string {
	var out []string
	for _, e := range g.s.Keys() {
		out = append(out, e.Key)
	}
	return out[:min(n, len(out))]
}

type heavyKeeper struct{ s *hk.HeavyKeeper }

func (h heavyKeeper) add(k string) { h.s.Sample(k, 1) }
func (h heavyKeeper) top(n int) []string {
	var out []string
	for _, f := range h.s.Top() {
		out = append(out, f.Flow)
	}
	return out[:min(n, len(out))]
}

type exactMap map[string]int

func (m exactMap) add(k string) { m[k]++ }
func (m exactMap) top(n int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int { return m[b] - m[a] })
	return keys[:min(n, len(keys))]
}

var topkContenders = []struct {
	name string
	new  func(capacity int) heavyHitters
}{
	{"qtop", func(k int) heavyHitters { return qtopSS{spacesaving.New(k)} }},
	{"go-topk", func(k int) heavyHitters { return goTopK{gotopk.New(k)} }},
	// HeavyKeeper sized for k = capacity; decay 0.9 as its README suggests.
	{"segmentio-heavykeeper", func(k int) heavyHitters { return heavyKeeper{hk.New(k, 0.9)} }},
	{"exact-map", func(int) heavyHitters { return exactMap{} }},
}

func BenchmarkTopKUpdate(b *testing.B) {
	st := zipfKeys()
	for _, k := range []int{200, 1000} {
		for _, c := range topkContenders {
			b.Run(fmt.Sprintf("%s/k=%d", c.name, k), func(b *testing.B) {
				h := c.new(k)
				for _, e := range st.events[:topkEvents/10] { // warm: full, steady state
					h.add(st.keys[e])
				}
				n := uint32(len(st.events))
				i := uint32(topkEvents / 10)
				for b.Loop() {
					h.add(st.keys[st.events[i]])
					if i++; i == n {
						i = 0
					}
				}
			})
		}
	}
}

func BenchmarkTopKRecall(b *testing.B) {
	st := zipfKeys()
	for _, c := range topkContenders {
		b.Run(c.name+"/k=200", func(b *testing.B) {
			var recall float64
			for b.Loop() {
				h := c.new(200)
				for _, e := range st.events {
					h.add(st.keys[e])
				}
				got := h.top(topkRecall)
				hit := 0
				for _, k := range st.truth {
					if slices.Contains(got, k) {
						hit++
					}
				}
				recall = float64(hit) / topkRecall
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/topkEvents, "ns/update")
			b.ReportMetric(recall, "recall@100")
		})
	}
}

// lockedTopK makes go-topk safe for concurrent use, the way an
// application would have to.
type lockedTopK struct {
	mu sync.Mutex
	s  *gotopk.Stream
}

func (l *lockedTopK) add(k string) {
	l.mu.Lock()
	l.s.Insert(k, 1)
	l.mu.Unlock()
}

func BenchmarkTopKParallel(b *testing.B) {
	st := zipfKeys()
	impls := []struct {
		name string
		new  func() func(string)
	}{
		{"qtop-concurrent", func() func(string) {
			c := spacesaving.NewConcurrent(1000)
			return func(k string) { c.Add(k, 1) }
		}},
		{"go-topk-mutex", func() func(string) {
			l := &lockedTopK{s: gotopk.New(1000)}
			return l.add
		}},
	}
	for _, im := range impls {
		b.Run(im.name+"/serial", func(b *testing.B) {
			add := im.new()
			i := 0
			for b.Loop() {
				add(st.keys[st.events[i%topkEvents]])
				i++
			}
		})
		b.Run(fmt.Sprintf("%s/parallel-%d", im.name, runtime.GOMAXPROCS(0)), func(b *testing.B) {
			add := im.new()
			var next atomic.Uint64
			b.RunParallel(func(pb *testing.PB) {
				i := next.Add(1<<20) % topkEvents
				for pb.Next() {
					add(st.keys[st.events[i]])
					if i++; i == topkEvents {
						i = 0
					}
				}
			})
		})
	}
}

func BenchmarkTopKInterleaved(b *testing.B) {
	st := zipfKeys()
	const warm, chunk, rounds = topkEvents / 10, 20_000, 100
	for _, k := range []int{200, 1000} {
		b.Run(fmt.Sprintf("k=%d", k), func(b *testing.B) {
			for b.Loop() {
				hs := make([]heavyHitters, len(topkContenders))
				spent := make([]time.Duration, len(topkContenders))
				for i, c := range topkContenders {
					hs[i] = c.new(k)
					for _, e := range st.events[:warm] {
						hs[i].add(st.keys[e])
					}
				}
				pos := warm
				for r := range rounds {
					evs := st.events[pos : pos+chunk]
					for j := range hs {
						i := (j + r) % len(hs)
						h := hs[i]
						t0 := time.Now()
						for _, e := range evs {
							h.add(st.keys[e])
						}
						spent[i] += time.Since(t0)
					}
					pos += chunk
				}
				per := func(i int) float64 { return float64(spent[i].Nanoseconds()) / (chunk * rounds) }
				for i, c := range topkContenders {
					b.ReportMetric(per(i), c.name+"-ns/update")
					if i > 0 {
						b.ReportMetric(per(0)/per(i), "qtop/"+c.name)
					}
				}
			}
		})
	}
}
