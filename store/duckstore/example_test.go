package duckstore_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/qtop-dev/qtop/store"
	"github.com/qtop-dev/qtop/store/duckstore"
)

func ExampleOpen() {
	dir, _ := os.MkdirTemp("", "duckstore")
	defer os.RemoveAll(dir)
	s, err := duckstore.Open(filepath.Join(dir, "qtop.duckdb"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	ctx := context.Background()
	minute := time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)
	v1 := store.Rollup{Minute: minute, Writer: "collector-1", Version: 1, Tenant: "acme", Route: "GET /", Kind: store.KindRequest, Count: 10, RU: 20}
	v2 := v1
	v2.Version, v2.Count, v2.RU = 2, 12, 24 // a late report re-emits the minute
	s.WriteRollups(ctx, []store.Rollup{v1})
	s.WriteRollups(ctx, []store.Rollup{v2})
	s.WriteRollups(ctx, []store.Rollup{v1}) // a stale replay changes nothing
	usage, _ := s.Usage(ctx, minute, minute.Add(time.Hour), false)
	fmt.Printf("%s: %d requests, %.0f RU\n", usage[0].Tenant, usage[0].Requests, usage[0].RU)
	// Output:
	// acme: 12 requests, 24 RU
}
