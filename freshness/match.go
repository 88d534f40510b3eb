package freshness

import (
	"time"

	"github.com/qtop-dev/qtop/policy"
)

// Matches reports whether rule r matches a GET of the given
// cause whose client copy is age old, with the app open for appAge
// (hasAppAge false: no app-age header) — exactly the test the middleware
// makes once it has verified the request's ETag. Package sim uses it to
// replay traces without HTTP.
func Matches(r policy.FreshnessRule, cause policy.Cause, age time.Duration, appAge time.Duration, hasAppAge bool) bool {
	fr := freshRule{cause: r.Cause, route: "",
		maxAge:    time.Duration(r.MaxAgeSeconds * float64(time.Second)),
		maxAppAge: time.Duration(r.MaxAppAgeSeconds * float64(time.Second))}
	q := freshRequest{cause: cause, age: max(age, 0), appAge: appAge, hasAppAge: hasAppAge, hasETag: true}
	return fr.matches(&q, "")
}
