package gcra_test

import (
	"fmt"
	"time"

	"github.com/qtop-dev/qtop/gcra"
)

// A bucket of 10 units a second, burst 20, charged after the work with
// its real cost: a costly request puts it into debt, and the next request
// waits until the debt is paid.
func Example() {
	r, err := gcra.NewRate(10, 20)
	if err != nil {
		panic(err)
	}
	var b gcra.Bucket // full
	t0 := time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)

	fmt.Println(b.AllowAt(t0, r, 0), b.TokensAt(t0, r))
	b.ChargeAt(t0, r, 35) // the work cost 35
	fmt.Println(b.AllowAt(t0, r, 0), b.TokensAt(t0, r), b.WaitAt(t0, r, 0))
	t1 := t0.Add(1500 * time.Millisecond)
	fmt.Println(b.AllowAt(t1, r, 0), b.TokensAt(t1, r))
	// Output:
	// true 20
	// false -15 1.5s
	// true 0
}
