package collector

import "github.com/qtop-dev/qtop/ratio"

// sparse is the collector's latency histogram: ratio.Sparse, the one
// sparse, mergeable histogram from the wire to the rollups.
type sparse = ratio.Sparse

func quantileOf(q float64, hs ...*sparse) float64 { return ratio.QuantileOf(q, hs...) }
