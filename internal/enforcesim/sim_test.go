package enforcesim

import (
	"bytes"
	"errors"
	"math"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Each deterministic scenario runs once per test binary.
var (
	fairRows      = sync.OnceValues(func() ([]FairRow, error) { return Fair(DefaultFair()) })
	overloadRows  = sync.OnceValues(func() ([]OverloadRow, error) { return Overload(DefaultOverload()) })
	overshootRows = sync.OnceValues(func() ([]OvershootRow, error) { return Overshoot(DefaultOvershoot()) })
)

func TestFairScenario(t *testing.T) {
	rows, err := fairRows()
	if err != nil {
		t.Fatal(err)
	}
	fifo, fair := rows[0], rows[1]
	if fifo.Small.N != 500 || fair.Small.N != 500 || fair.Big.N != 2000 {
		t.Fatalf("jobs lost: %+v", rows)
	}
	// FIFO makes small tenants wait behind the 2,000 jobs (5 s of work on
	// four workers); the fair queue serves them within a job's time.
	if fifo.Small.P99 < 4*time.Second {
		t.Errorf("FIFO small p99 %v", fifo.Small.P99)
	}
	if fair.Small.Max > 10*time.Millisecond {
		t.Errorf("fair small max wait %v", fair.Small.Max)
	}
	if fair.Makespan != fifo.Makespan {
		t.Errorf("fairness changed the total work: %v vs %v", fair.Makespan, fifo.Makespan)
	}
}

func TestOverloadScenario(t *testing.T) {
	rows, err := overloadRows()
	if err != nil {
		t.Fatal(err)
	}
	static, ru := rows[0], rows[1]
	if ru.Goodput[0] != 1 || ru.SpikeGoodput[0] != 1 {
		t.Errorf("T0 goodput %v (spike %v), want 100%%", ru.Goodput[0], ru.SpikeGoodput[0])
	}
	// Lower tiers give way in order.
	if !(ru.SpikeGoodput[1] >= ru.SpikeGoodput[2] && ru.SpikeGoodput[2] >= ru.SpikeGoodput[3]) {
		t.Errorf("spike goodput not ordered by tier: %v", ru.SpikeGoodput)
	}
	if ru.AdmittedRU > DefaultOverload().Capacity*1.05 {
		t.Errorf("admitted %v RU/s in the spike, capacity %v", ru.AdmittedRU, DefaultOverload().Capacity)
	}
	if ru.Recovery < 0 || (static.Recovery >= 0 && 2*ru.Recovery > static.Recovery) {
		t.Errorf("recovery %v vs static %v: want at least twice as fast", ru.Recovery, static.Recovery)
	}
	if static.SpikeGoodput[0] > 0.5 {
		t.Errorf("static limits kept T0 at %v: the scenario is not an overload", static.SpikeGoodput[0])
	}
}

func TestOvershootScenario(t *testing.T) {
	rows, err := overshootRows()
	if err != nil {
		t.Fatal(err)
	}
	static, ru := rows[0], rows[1]
	if math.Abs(ru.Overshoot) > 0.05 {
		t.Errorf("RU bucket overshoot %+.2f%%, want within 5%%", 100*ru.Overshoot)
	}
	if static.Overshoot < 0.5 {
		t.Errorf("static QPS overshoot %+.2f%%: cost drift should show", 100*static.Overshoot)
	}
}

func TestStormScenario(t *testing.T) {
	c := DefaultStorm()
	// A quarter of the storm keeps the race-detector run short; the bound
	// is the same (the package doc's table is the full storm).
	c.Requests = 250_000
	rows, err := Storm(c)
	if err != nil {
		t.Fatal(err)
	}
	guard := rows[2]
	if guard.MaxAfterFirst > 1 {
		t.Errorf("a hot key reached the backend %d times in one TTL window", guard.MaxAfterFirst)
	}
	windows := int64(c.Span / c.TTL)
	if guard.BackendCalls > int64(c.Keys)*(3+windows) {
		t.Errorf("%d backend calls, bound %d", guard.BackendCalls, int64(c.Keys)*(3+windows))
	}
}

// TestDocTables checks that the tables in doc.go are what the scenarios
// produce now.
func TestDocTables(t *testing.T) {
	var b bytes.Buffer
	f, err1 := fairRows()
	o, err2 := overloadRows()
	s, err3 := overshootRows()
	if err := errors.Join(err1, err2, err3); err != nil {
		t.Fatal(err)
	}
	writeTables(&b, f, o, s)
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(b.String(), "\n") {
		if strings.HasPrefix(line, "| ") && !strings.Contains(string(doc), "//\t"+line) {
			t.Errorf("doc.go lacks or has a stale row:\n%s\n(run go test -run TestDocTables -v to see all rows)", line)
		}
	}
	if t.Failed() {
		t.Log("\n" + b.String())
	}
}
