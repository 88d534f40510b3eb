package quota

import (
	"errors"
	"time"

	"github.com/qtop-dev/qtop/tenant"
)

// Errors of the package; test with errors.Is.
var (
	// ErrConfig: an option or argument is out of range.
	ErrConfig = errors.New("quota: invalid configuration")
)

// Usage is what one process did for one tenant during one reporting
// window, in request units: the RU it admitted (charged after the work)
// and the RU it refused (estimated: the tenant's mean cost per admitted
// request in this process). Demand is their sum.
type Usage struct {
	Tenant   string
	Tier     tenant.Tier
	Admitted float64
	Refused  float64
}

// Demand is the RU the tenant asked for: admitted plus refused.
func (u Usage) Demand() float64 { return u.Admitted + u.Refused }

// Verdict is the collector's answer for one tenant that must be limited,
// addressed to one process.
//
// For is how long the answer holds from the moment the process receives
// it (its reject-until time, relative so that the clocks of the process
// and the collector need not agree). Rate is the fleet's rejection rate
// over the last interval, (estimated − limit) / estimated, for display
// and for callers that shed by probability; Allowance is the same answer
// as a local rate: the RU per second this process may admit, its share of
// the limit in proportion to its share of the fleet's demand. Shadow
// verdicts are counted but not applied.
type Verdict struct {
	Tenant    string
	For       time.Duration
	Rate      float64
	Allowance float64
	Shadow    bool
}

// Limit is a tenant's fleet-wide rate in RU per second; Shadow limits
// are decided and counted but not applied.
type Limit struct {
	RUPerSecond float64
	Shadow      bool
}
