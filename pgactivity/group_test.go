package pgactivity

import (
	"testing"

	"github.com/qtop-dev/qtop/tenant"
)

// TestGroupByLeader: under GroupBy a parallel worker counts under its
// leader's key, route and tier (a worker shows no application_name), and
// under its own when the leader is not in the snapshot.
func TestGroupByLeader(t *testing.T) {
	a := NewAggregator(GroupBy(func(b *Backend) string { return b.Application }))
	leader := act(1, "acme", 0, 1, "")
	leader.Application, leader.Tier = "billing", tenant.T2
	worker := act(2, "", 0, 1, "IO")
	worker.LeaderPID = 1
	orphan := act(3, "", 0, 1, "")
	orphan.LeaderPID, orphan.Application = 99, "batch"
	a.Add(Snapshot{Time: at(1), Backends: []Backend{leader, worker, orphan, idle(4, "acme")}})
	w := a.Cut(at(2))
	b := load(w, "billing")
	if b.AAS != 2 || b.Waits[WaitCPU] != 1 || b.Waits["IO"] != 1 || b.Routes["r1"] != 2 || b.Tier != tenant.T2 || b.Statements != 1 {
		t.Errorf("billing: %+v", b)
	}
	if l := load(w, "batch"); l.AAS != 1 || l.Statements != 0 {
		t.Errorf("batch: %+v", l)
	}
	if len(w.Tenants) != 2 {
		t.Errorf("groups %+v", w.Tenants)
	}
}

// TestMergeTenants: merging one-sample windows gives the load of the
// samples added to one aggregator.
func TestMergeTenants(t *testing.T) {
	steps := []Snapshot{
		{Time: at(1), Backends: []Backend{act(1, "a", 0, 1, ""), act(2, "a", 1, 1, "IO"), act(3, "b", 0, 1, "")}},
		{Time: at(2), Backends: []Backend{act(1, "a", 0, 2, ""), act(5, "", 2, 2, "Lock")}},
		{Time: at(3), Backends: []Backend{act(6, "b", 3, 3, "")}},
	}
	one, each := NewAggregator(), NewAggregator()
	var ws []Window
	for _, s := range steps {
		one.Add(s)
		each.Add(s)
		ws = append(ws, each.Cut(s.Time))
	}
	want := one.Cut(at(4)).Tenants
	got := MergeTenants(ws...)
	if len(got) != len(want) {
		t.Fatalf("merged %+v, want %+v", got, want)
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Tenant != w.Tenant || !near(g.AAS, w.AAS) || !near(g.Waits[WaitCPU], w.Waits[WaitCPU]) || !near(g.Routes["r1"], w.Routes["r1"]) ||
			g.Longest != w.Longest {
			t.Errorf("%d: merged %+v, want %+v", i, g, w)
		}
	}
	if MergeTenants() != nil || MergeTenants(Window{}) != nil {
		t.Error("no samples: want nil")
	}
}
