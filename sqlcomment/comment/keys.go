package comment

// Tag keys qtop writes (sqlcomment's Append, its Commenter) and reads.
// Keys are sorted in the comment, as the sqlcommenter specification
// requires.
const (
	KeyApplication = "application"
	KeyDBDriver    = "db_driver"
	KeyKey         = "key"
	KeyRoute       = "route"
	KeyTenant      = "tenant"
	KeyTier        = "tier"
	KeyTraceparent = "traceparent"
	KeyTracestate  = "tracestate"
)
