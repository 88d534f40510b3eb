package hotkey_test

import (
	"context"
	"fmt"
	"time"

	"github.com/qtop-dev/qtop/hotkey"
)

func Example() {
	loads := 0
	g, err := hotkey.New(func(ctx context.Context, id string) (string, error) {
		loads++ // the backend call: a database read, an RPC
		return "product " + id, nil
	}, nil, hotkey.WithThreshold(3, time.Second))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer g.Shutdown(context.Background())
	now := time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)
	for i := 0; i < 1000; i++ {
		_, _ = g.GetAt(context.Background(), now, "p-42") // a storm on one key
	}
	v, _ := g.GetAt(context.Background(), now, "p-42")
	fmt.Println(v, "—", loads, "loads for 1,001 reads")
	// Output: product p-42 — 3 loads for 1,001 reads
}
