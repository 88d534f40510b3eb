package collector

import (
	"github.com/qtop-dev/qtop/histogram"
)

// sparse is the collector's latency histogram: ratio.Sparse, the one
// sparse, mergeable histogram from the wire to the rollups.
type sparse = histogram.Sparse

func quantileOf(q float64, hs ...*sparse) float64 { return histogram.QuantileOf(q, hs...) }
