package fairqueue_test

import (
	"context"
	"fmt"

	"github.com/qtop-dev/qtop/fairqueue"
)

func Example() {
	q, _ := fairqueue.New[string]()
	ctx := context.Background()
	for i := 0; i < 4; i++ {
		_ = q.Push(ctx, "big", fmt.Sprint("big-", i))
	}
	_ = q.Push(ctx, "small", "small-0")
	for {
		job, ok := q.Pop()
		if !ok {
			break
		}
		fmt.Println(job)
	}
	// Output:
	// big-0
	// small-0
	// big-1
	// big-2
	// big-3
}
