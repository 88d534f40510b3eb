package enforcesim

import (
	"time"

	"github.com/qtop-dev/qtop/gcra"
)

// qpsLimit is the static limit the scenarios compare against: one request
// is one unit, whatever it costs.
type qpsLimit struct {
	b gcra.Bucket
	r gcra.Rate
}

func newQPSLimit(perSecond, burst float64) (*qpsLimit, error) {
	r, err := gcra.NewRate(perSecond, burst)
	if err != nil {
		return nil, err
	}
	return &qpsLimit{r: r}, nil
}

// take admits one request while the bucket is out of debt.
func (q *qpsLimit) take(now time.Time) bool { return q.b.TakeAt(now, q.r, 1) }
