package spacesaving

import (
	"sync"
	"sync/atomic"
	"testing"
)

var benchStream = sync.OnceValue(func() []event {
	// Zipf(1.1) over 1M keys, as in bench/ (which runs 10M events).
	return zipfStream(42, 1<<21, 1_000_000, 1.1, false)
})

// BenchmarkAdd is the steady-state update: the sketch is warm and full.
func BenchmarkAdd(b *testing.B) {
	for _, k := range []int{200, 1000} {
		b.Run(itoa(k), func(b *testing.B) {
			ev := benchStream()
			s := New(k)
			feed(s, ev[:len(ev)/4])
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				x := &ev[i&(len(ev)-1)]
				s.Add(x.key, 1)
			}
		})
	}
}

// BenchmarkNew reports the memory of a sketch (B/op).
func BenchmarkNew(b *testing.B) {
	for _, k := range []int{200, 1000} {
		b.Run(itoa(k), func(b *testing.B) {
			for b.Loop() {
				New(k)
			}
		})
	}
}

// BenchmarkConcurrentAdd compares one goroutine with GOMAXPROCS of them
// on the same Concurrent sketch: ns/op is per update in both.
func BenchmarkConcurrentAdd(b *testing.B) {
	ev := benchStream()
	b.Run("serial", func(b *testing.B) {
		c := NewConcurrent(1000)
		for i := 0; b.Loop(); i++ {
			x := &ev[i&(len(ev)-1)]
			c.Add(x.key, 1)
		}
	})
	b.Run("parallel", func(b *testing.B) {
		c := NewConcurrent(1000)
		var next atomic.Uint64
		b.RunParallel(func(pb *testing.PB) {
			i := next.Add(1 << 18)
			for pb.Next() {
				x := &ev[i&uint64(len(ev)-1)]
				c.Add(x.key, 1)
				i++
			}
		})
	})
}

func BenchmarkMerge(b *testing.B) {
	ev := benchStream()
	x, y := New(1000), New(1000)
	feed(x, ev[:1<<18])
	feed(y, ev[1<<18:1<<19])
	for b.Loop() {
		c := x.Clone()
		c.Merge(y)
	}
}

func BenchmarkMarshalUnmarshal(b *testing.B) {
	s := New(1000)
	feed(s, benchStream()[:1<<18])
	var d Sketch
	for b.Loop() {
		buf, _ := s.MarshalBinary()
		if err := d.UnmarshalBinary(buf); err != nil {
			b.Fatal(err)
		}
	}
}

func itoa(k int) string {
	if k == 200 {
		return "k=200"
	}
	return "k=1000"
}
