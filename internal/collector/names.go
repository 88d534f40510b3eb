package collector

import (
	"context"
	"sync"
	"time"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/report"
	"github.com/qtop-dev/qtop/sqlcomment/tenantnames"
)

// maxTenantNames bounds the short ids the collector keeps names for; the
// oldest go first. The processes send every name again every
// sqlcomment.ResendEvery reports, so a name dropped (or lost in a
// restart) comes back.
const maxTenantNames = 100_000

// tenantNames keeps the tenant behind each short id that session tagging
// wrote in application_name (comment.TenantID), from the Names section
// of the processes' reports, so that the pg_stat_activity sampler names
// those tenants (pgactivity.WithTenantNames). A section cannot rename
// another tenant's sessions: each id is checked to be its name's
// TenantID when the section is decoded.
type tenantNames struct {
	mu    sync.Mutex
	byID  map[string]string
	order []string // ids in the order first kept: a ring of maxTenantNames
	next  int      // the ring's oldest once full
}

var _ feature = (*tenantNames)(nil)

func newTenantNames() *tenantNames { return &tenantNames{byID: map[string]string{}} }

func (n *tenantNames) merge(rep *report.Report, _ time.Time, _ bool) {
	sec, ok := report.SectionOf[tenantnames.Names](rep)
	if !ok {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, x := range sec {
		if _, ok := n.byID[x.ID]; ok {
			continue
		}
		if len(n.order) < maxTenantNames {
			n.order = append(n.order, x.ID)
		} else {
			delete(n.byID, n.order[n.next])
			n.order[n.next] = x.ID
			n.next = (n.next + 1) % maxTenantNames
		}
		n.byID[x.ID] = x.Name
	}
}

// lookup is the sampler's: the name behind id.
func (n *tenantNames) lookup(id string) (string, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	name, ok := n.byID[id]
	return name, ok
}

func (n *tenantNames) reply(_ *report.Report, _ time.Time, r report.Reply, _ bool) report.Reply {
	return r
}
func (n *tenantNames) snapshot(*api.Snapshot, time.Time) {}
func (n *tenantNames) tick(context.Context, time.Time)   {}
