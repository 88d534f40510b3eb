package pgactivity

import (
	"sync"

	"github.com/qtop-dev/qtop/sqlcomment/comment"
)

// maxSeenNames bounds the names a Sampler learns from comments; the
// oldest go first.
const maxSeenNames = 4096

// seenNames maps the short id session tagging writes for a long or
// non-ASCII tenant (comment.TenantID) back to the name, learned from the
// statements whose comment carried that name: the same tenant, in a
// session tagged with its id and in a statement commented with its name,
// counts under one name, with or without WithTenantNames. A comment can
// teach only the name whose hash the id is, so it cannot rename another
// tenant's sessions. Safe for concurrent use; the zero value is empty.
type seenNames struct {
	mu    sync.Mutex
	byID  map[string]string
	order []string // ids in the order learned: a ring of maxSeenNames
	next  int      // the ring's oldest once full
}

// learn records the tenant of b's comment, when session tagging would
// write it as an id.
func (n *seenNames) learn(b *Backend) {
	if b.Tenant == "" || b.Tags[comment.KeyTenant] == "" {
		return // no comment named a tenant
	}
	id, ok := comment.WrittenID(b.Tenant)
	if !ok {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if _, ok := n.byID[id]; ok {
		return
	}
	if n.byID == nil {
		n.byID = map[string]string{}
	}
	if len(n.order) < maxSeenNames {
		n.order = append(n.order, id)
	} else {
		delete(n.byID, n.order[n.next])
		n.order[n.next] = id
		n.next = (n.next + 1) % maxSeenNames
	}
	n.byID[id] = b.Tenant
}

// lookup returns the name learned for id.
func (n *seenNames) lookup(id string) (string, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	name, ok := n.byID[id]
	return name, ok
}

// resolver returns the names of WithTenantNames (names, may be nil),
// then the learned ones.
func (n *seenNames) resolver(names func(string) (string, bool)) func(string) (string, bool) {
	return func(id string) (string, bool) {
		if names != nil {
			if name, ok := names(id); ok {
				return name, true
			}
		}
		return n.lookup(id)
	}
}
