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
