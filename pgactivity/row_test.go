package pgactivity

import (
	"reflect"
	"testing"
	"time"

	"github.com/qtop-dev/qtop/api"
)

// TestRowCarriesEveryColumn: the collector's live view once dropped the
// lock a session waits for because it had its own copy of this
// conversion; Row is now the only one, and carries every column.
func TestRowCarriesEveryColumn(t *testing.T) {
	at := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	b := Backend{PID: 7, Tenant: "acme", Route: "GET /x", Application: "app", State: "active",
		WaitEventType: "Lock", WaitEvent: "relation", Duration: time.Second, Query: "select 1",
		BlockedBy: []int32{3}, User: "u", Database: "shop", Client: "10.0.0.1",
		QueryStart: at, XactStart: at.Add(-time.Second), BackendStart: at.Add(-time.Minute),
		XminAge: 0, Extras: Extras{LockWait: "AccessShareLock on stock"}}
	want := api.StatementRow{PID: 7, Tenant: "acme", Route: "GET /x", Application: "app", State: "active",
		WaitEventType: "Lock", WaitEvent: "relation", Duration: time.Second, Query: "select 1",
		BlockedBy: []int32{3}, User: "u", Database: "shop", Client: "10.0.0.1",
		QueryStart: at, XactStart: at.Add(-time.Second), BackendStart: at.Add(-time.Minute),
		LockWait: "AccessShareLock on stock", XminAge: 1}
	if got := b.Row(); !reflect.DeepEqual(got, want) {
		t.Fatalf("Row() = %+v\nwant %+v", got, want)
	}
	b.XminAge = -1
	if got := b.Row(); got.XminAge != 0 {
		t.Fatalf("a session holding no xmin shows age %d", got.XminAge)
	}
}
