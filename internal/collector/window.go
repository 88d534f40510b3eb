package collector

import (
	"math"

	"github.com/qtop-dev/qtop/api"
)

// Ring sizes: rates and quantiles are over the last rateN complete
// seconds; histories hold histN seconds. A ring of per-second slots holds
// ringN = rateN + 1 of them: the rateN complete seconds and the one being
// written. (With only rateN slots the current second overwrites the
// oldest complete one, so 9 seconds were summed and divided by 10: every
// rate read 10% low.)
const (
	rateN = 10
	ringN = rateN + 1
	histN = api.HistoryLen
)

// window10 is a ring of per-second sums over rateN seconds. A slot belongs
// to the Unix second in stamp; a slot whose stamp is not the second being
// written is reset first, so a clock that jumps (either way) only ever
// forgets seconds, never mixes them.
type window10 struct {
	stamp    [ringN]int64
	ru, db   [ringN]float64
	pg       [ringN]float64 // sampled active sessions (max of the second's samples)
	req, err [ringN]uint64
	lat      [ringN]sparse
	gone     bool // a route's window, pruned (see rowAgg.rw)
}

func (w *window10) slot(sec int64) int {
	i := int(uint64(sec) % ringN)
	if w.stamp[i] != sec {
		w.stamp[i] = sec
		w.ru[i], w.db[i], w.pg[i], w.req[i], w.err[i] = 0, 0, 0, 0, 0
		w.lat[i].Reset()
	}
	return i
}

// inWindow reports whether slot i holds one of the rateN complete seconds
// before now.
func (w *window10) inWindow(i int, now int64) bool {
	s := w.stamp[i]
	return s >= now-rateN && s < now && s != 0
}

type rates struct {
	ru, db, req, err, p95 float64
	active                bool
}

func (w *window10) rates(now int64) rates { return w.ratesP95(now, true) }

// ratesP95 is rates, with the p95 (which merges the slots' histograms)
// only when withP95.
func (w *window10) ratesP95(now int64, withP95 bool) rates {
	var r rates
	var pg float64
	var lats []*sparse
	for i := range ringN {
		if !w.inWindow(i, now) {
			continue
		}
		r.ru = finiteSum(r.ru, w.ru[i])
		r.db = finiteSum(r.db, w.db[i])
		pg += w.pg[i]
		r.req += float64(w.req[i])
		r.err += float64(w.err[i])
		if withP95 && w.lat[i].Len() > 0 {
			lats = append(lats, &w.lat[i])
		}
		r.active = r.active || w.ru[i] > 0 || w.db[i] > 0 || w.pg[i] > 0 || w.req[i] > 0
	}
	r.ru /= rateN
	r.db = max(r.db, pg) / rateN
	r.req /= rateN
	r.err /= rateN
	if len(lats) > 0 {
		r.p95 = quantileOf(0.95, lats...)
	}
	return r
}

// history is a ring of one float per second over histN seconds; a slot
// belongs to the Unix second in stamp (32 bits hold Unix seconds until
// 2106, and halve what a tenant's two histories cost). A nil *history is
// an empty one.
type history struct {
	stamp [histN]uint32
	v     [histN]float32
}

func (h *history) add(sec int64, v float64) {
	i := int(uint64(sec) % histN)
	if h.stamp[i] != uint32(sec) {
		h.stamp[i], h.v[i] = uint32(sec), 0
	}
	h.v[i] = float32(min(float64(h.v[i])+v, math.MaxFloat32))
}

func (h *history) set(sec int64, v float64) {
	i := int(uint64(sec) % histN)
	h.stamp[i], h.v[i] = uint32(sec), float32(min(v, math.MaxFloat32))
}

// series returns the histN complete seconds before now, oldest first,
// with 0 where nothing was recorded.
func (h *history) series(now int64) []float64 {
	out := make([]float64, histN)
	h.addTo(out, now)
	return out
}

// addTo adds the histN complete seconds before now, oldest first, to
// dst (len histN), with no allocation.
func (h *history) addTo(dst []float64, now int64) {
	if h == nil {
		return
	}
	for k := range histN {
		sec := now - histN + int64(k)
		i := int(uint64(sec) % histN)
		if h.stamp[i] == uint32(sec) {
			dst[k] = finiteSum(dst[k], float64(h.v[i]))
		}
	}
}
