package spacesaving_test

import (
	"fmt"

	"github.com/qtop-dev/qtop/spacesaving"
)

func Example() {
	s := spacesaving.New(3)
	for range 50 {
		s.Add("acme", 10) // a heavy tenant, weighted by DB milliseconds
	}
	s.Add("globex", 120)
	for i := range 20 {
		s.Add(fmt.Sprintf("small-%d", i), 1) // one-off keys share the last counter
	}
	for _, c := range s.Top(2) {
		fmt.Printf("%s count=%d err=%d\n", c.Key, c.Count, c.Err)
	}
	fmt.Println("total", s.Total())
	// Output:
	// acme count=500 err=0
	// globex count=120 err=0
	// total 640
}

// Two processes summarise their own streams; the collector merges them.
func ExampleSketch_Merge() {
	a, b := spacesaving.New(100), spacesaving.New(100)
	a.Add("acme", 30)
	a.Add("globex", 5)
	b.Add("acme", 12)
	b.Add("initech", 9)

	wire, err := b.MarshalBinary() // what b's process sends
	if err != nil {
		fmt.Println(err)
		return
	}
	var got spacesaving.Sketch
	if err := got.UnmarshalBinary(wire); err != nil {
		fmt.Println(err)
		return
	}
	a.Merge(&got)
	for _, c := range a.Top(3) {
		fmt.Println(c.Key, c.Count, c.Err)
	}
	// Output:
	// acme 42 0
	// initech 9 0
	// globex 5 0
}

// Request handlers add concurrently; a reporter cuts a window each second.
func ExampleConcurrent_Flush() {
	c := spacesaving.NewConcurrent(1000)
	done := make(chan struct{})
	for w := range 4 {
		go func() {
			defer func() { done <- struct{}{} }()
			for range 1000 {
				c.Add(fmt.Sprintf("key-%d", w), 1)
			}
		}()
	}
	for range 4 {
		<-done
	}
	window := c.Flush()
	fmt.Println(window.Total(), window.Len(), c.Total())
	// Output:
	// 4000 4 0
}
