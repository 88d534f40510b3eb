package ratio_test

import (
	"fmt"
	"time"

	"github.com/qtop-dev/qtop/ratio"
)

func ExampleSignal() {
	s := ratio.NewSignal()
	t0 := time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)
	// Five minutes of 20 ms requests, 100 per second...
	for i := 0; i < 5*60*100; i++ {
		s.ObserveAt(t0.Add(time.Duration(i)*10*time.Millisecond), 0.020)
	}
	now := t0.Add(5 * time.Minute)
	r, ok := s.ValueAt(now)
	fmt.Printf("steady: ratio %.2f ok %v degraded %v\n", r, ok, s.DegradedAt(now))
	// ...then latency triples for 10 seconds.
	for i := 0; i < 10*100; i++ {
		s.ObserveAt(now.Add(time.Duration(i)*10*time.Millisecond), 0.060)
	}
	now = now.Add(10 * time.Second)
	r, ok = s.ValueAt(now)
	fmt.Printf("tripled: ratio %.2f ok %v degraded %v\n", r, ok, s.DegradedAt(now))
	// Output:
	// steady: ratio 1.00 ok true degraded false
	// tripled: ratio 0.33 ok true degraded true
}

func ExampleP2() {
	e := ratio.NewP2(0.5)
	for _, x := range []float64{3, 1, 2} {
		e.Add(x)
	}
	fmt.Println(e.Value())
	// Output:
	// 2
}
