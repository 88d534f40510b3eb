package demo

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/internal/collector"
	"github.com/qtop-dev/qtop/internal/tui"
	"github.com/qtop-dev/qtop/policy"
)

// TestDemoSource runs the in-process demo on its DuckDB store: data comes
// within seconds, and a throttle lands in its policy.
func TestDemoSource(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	d, err := New(ctx)
	if err != nil {
		t.Fatal(err)
	}
	dir := d.Dir()
	s, err := d.Once(ctx, tui.Query{Measure: api.MeasureRU, Top: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Tenants) == 0 || len(s.Services) != 3 || s.Source != api.SourceDemo || !strings.HasPrefix(s.Collector.Store, "duckdb://") {
		t.Fatalf("demo snapshot: %d tenants, %d services, source %q, store %q", len(s.Tenants), len(s.Services), s.Source, s.Collector.Store)
	}
	if err := d.Throttle(ctx, policy.Rule{Tenant: collector.DemoImportTenant, Action: policy.Throttle, RUPerSecond: 10, Expires: time.Now().Add(time.Minute), Reason: "test"}); err != nil {
		t.Fatal(err)
	}
	s, err = d.Next(ctx, tui.Query{Measure: api.MeasureRU, Top: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Policy.Rules) != 1 || s.Policy.Rules[0].Tenant != collector.DemoImportTenant {
		t.Fatalf("policy after the throttle: %+v", s.Policy)
	}
	if err := d.Throttle(ctx, policy.Rule{}); err == nil {
		t.Fatal("an invalid rule was accepted")
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Next(ctx, tui.Query{}); !errors.Is(err, tui.ErrClosed) {
		t.Fatalf("Next after Close: %v", err)
	}
	if _, err := os.Stat(dir); err == nil {
		t.Fatalf("the demo's temporary folder %s is still there", dir)
	}
}
