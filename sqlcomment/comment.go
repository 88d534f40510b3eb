package sqlcomment

import (
	"github.com/qtop-dev/qtop/sqlcomment/comment"
	"github.com/qtop-dev/qtop/tenant"
)

// The comment format's reading side and the session tag live in package
// comment, which readers import without this driver wrapper; these names
// are the same ones, kept so that a program writing tags with sqlcomment
// reads them back with it too.

// Tag keys written by this package (comment.KeyTenant, …).
const (
	KeyApplication = comment.KeyApplication
	KeyDBDriver    = comment.KeyDBDriver
	KeyKey         = comment.KeyKey
	KeyRoute       = comment.KeyRoute
	KeyTenant      = comment.KeyTenant
	KeyTier        = comment.KeyTier
	KeyTraceparent = comment.KeyTraceparent
	KeyTracestate  = comment.KeyTracestate
)

// ErrMalformed is comment.ErrMalformed: Parse's error for a comment it
// cannot read whole; test with errors.Is.
var ErrMalformed = comment.ErrMalformed

// MaxParsedTags is comment.MaxParsedTags.
const MaxParsedTags = comment.MaxParsedTags

// Parse is comment.Parse: the tags of every block comment of query, the
// inverse of Append.
func Parse(query string) (map[string]string, error) { return comment.Parse(query) }

// Shape is comment.Shape: a 64-bit hash of query's shape (literals,
// comments and layout aside).
func Shape(query string) uint64 { return comment.Shape(query) }

// MaxApplicationNameLen is comment.MaxApplicationNameLen.
const MaxApplicationNameLen = comment.MaxApplicationNameLen

// AppName is what ApplicationName wrote in an application_name.
type AppName = comment.AppName

// ApplicationName is comment.ApplicationName: the application_name
// ("billing|t=acme|T2") that carries service and t's tenant and tier.
func ApplicationName(service string, t tenant.Tags) string {
	return comment.ApplicationName(service, t)
}

// ParseApplicationName is comment.ParseApplicationName, the inverse of
// ApplicationName.
func ParseApplicationName(s string) (AppName, bool) { return comment.ParseApplicationName(s) }

// TenantID is comment.TenantID: the short id ApplicationName writes for a
// tenant whose name does not fit.
func TenantID(name string) string { return comment.TenantID(name) }
