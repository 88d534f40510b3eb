package pgactivity

import (
	"strings"

	"github.com/qtop-dev/qtop/sqlcomment/comment"
	"github.com/qtop-dev/qtop/tenant"
)

// WithTenantNames resolves the short ids that session tagging writes for
// tenants whose names do not fit in application_name
// (sqlcomment.TenantID): names(id) returns the name, from what the
// applications reported (sqlcomment.TenantNames). An id it does not know
// is named from the statements' comments the Sampler has read (the last
// 4,096 such names), and otherwise kept as the tenant, so its load is
// still told apart, as is one whose name is not a valid one
// (tenant.ValidateTenant; the id is itself a hash of the name).
func WithTenantNames(names func(id string) (string, bool)) Option {
	return func(c *config) { c.names = names }
}

// setSessionTags reads the tags that session tagging (sqlcomment.ModeSession)
// put in application_name: the service stays Application, so grouping by
// application still groups by service; the tenant and tier fill what the
// statement's comment did not say (a comment, per statement, wins).
// PostgreSQL shows application_name even for sessions it hides from the
// role, so their tenant is known too.
func (b *Backend) setSessionTags(names func(string) (string, bool)) {
	a, ok := comment.ParseApplicationName(b.Application)
	if !ok {
		return
	}
	// A statement without arguments is sent in one simple query after
	// the SET LOCAL that tags it (pgxcomment): the statement is what
	// follows, for its fingerprint, the views and EXPLAIN.
	if rest, cut := strings.CutPrefix(b.Query, "SET LOCAL application_name = '"+b.Application+"'; "); cut {
		b.Query = rest
	}
	b.Application = a.Service
	b.SessionTagged = true
	if b.Application == "" && b.Tags != nil {
		b.Application = b.Tags[comment.KeyApplication]
	}
	if b.Tenant == "" {
		b.Tenant = a.Tenant
		if !a.ID {
			b.Tenant = tenant.Escape(a.Tenant) // as the comment's door names it
		} else if names != nil {
			if name, ok := names(a.Tenant); ok && tenant.ValidateTenant(name) == nil {
				b.Tenant = tenant.Escape(name)
			}
		}
	}
	if b.Tier == tenant.TierUnset {
		b.Tier = a.Tier
	}
}
