package collector

import (
	"math"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/report"
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

// counts10 is a ring of per-second sums over rateN seconds. A slot
// belongs to the Unix second in stamp; a slot whose stamp is not the
// second being written is reset first, so a clock that jumps (either way)
// only ever forgets seconds, never mixes them.
type counts10 struct {
	stamp    [ringN]int64
	ru, db   [ringN]float64
	pg       [ringN]float64 // sampled active sessions (max of the second's samples)
	req, err [ringN]uint64
}

// window10 is counts10 with each second's latency histogram: a route's
// or a service's (a tenant's latency is the sum of its routes', so its
// own ring has none: 352 bytes less a tenant).
type window10 struct {
	counts10
	lat  [ringN]sparse
	gone bool // a route's window, pruned (see rowAgg.rw)
}

func (c *counts10) slot(sec int64) int {
	i := int(uint64(sec) % ringN)
	if c.stamp[i] != sec {
		c.stamp[i] = sec
		c.ru[i], c.db[i], c.pg[i], c.req[i], c.err[i] = 0, 0, 0, 0, 0
	}
	return i
}

func (w *window10) slot(sec int64) int {
	i := int(uint64(sec) % ringN)
	if w.stamp[i] != sec {
		w.lat[i].Reset()
	}
	return w.counts10.slot(sec)
}

// add adds a row's sums to slot j, db for its DB time (its Duration,
// or PostgreSQL's measure of its statement shape: dbtime.go).
func (c *counts10) add(j int, row *report.Row, db float64) {
	c.ru[j] = finiteSum(c.ru[j], row.RU)
	switch row.Kind {
	case report.KindDB:
		c.db[j] = finiteSum(c.db[j], db)
	default:
		c.req[j] += row.Count
		c.err[j] += row.Errors
	}
}

// inWindow reports whether slot i holds one of the rateN complete seconds
// before now.
func (c *counts10) inWindow(i int, now int64) bool {
	s := c.stamp[i]
	return s >= now-rateN && s < now && s != 0
}

type rates struct {
	ru, db, req, err, p95 float64
	// stmt and pg are db's two sides: the statement rows' time (agents,
	// OTLP statement spans) and the sampler's active sessions, each a
	// second; db is the larger.
	stmt, pg float64
	active   bool
}

// rates is the window's rates over the rateN complete seconds before
// now, with no p95.
func (c *counts10) rates(now int64) rates { return c.ratesFrom(now, now-rateN) }

// ratesFrom is the rates over the complete seconds from from (at least
// now-rateN, at most now-1) to now.
func (c *counts10) ratesFrom(now, from int64) rates {
	from = min(max(from, now-rateN), now-1)
	secs := float64(now - from)
	var r rates
	var pg float64
	for i := range ringN {
		if !c.inWindow(i, now) || c.stamp[i] < from {
			continue
		}
		r.ru = finiteSum(r.ru, c.ru[i])
		r.db = finiteSum(r.db, c.db[i])
		pg += c.pg[i]
		r.req += float64(c.req[i])
		r.err += float64(c.err[i])
		r.active = r.active || c.ru[i] > 0 || c.db[i] > 0 || c.pg[i] > 0 || c.req[i] > 0
	}
	r.ru /= secs
	r.stmt, r.pg = r.db/secs, pg/secs
	r.db = max(r.stmt, r.pg)
	r.req /= secs
	r.err /= secs
	return r
}

// rates is counts10's rates with the p95 of the seconds' histograms.
func (w *window10) rates(now int64) rates { return w.ratesFrom(now, now-rateN) }

// ratesFrom is counts10's ratesFrom with the p95 of those seconds.
func (w *window10) ratesFrom(now, from int64) rates {
	r := w.counts10.ratesFrom(now, from)
	from = min(max(from, now-rateN), now-1)
	var buf [ringN]*sparse
	lats := buf[:0]
	for i := range ringN {
		if w.inWindow(i, now) && w.stamp[i] >= from && w.lat[i].Len() > 0 {
			lats = append(lats, &w.lat[i])
		}
	}
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

// at is the value of second sec, 0 when the ring holds no value of it.
func (h *history) at(sec int64) float64 {
	if h == nil {
		return 0
	}
	i := int(uint64(sec) % histN)
	if h.stamp[i] != uint32(sec) {
		return 0
	}
	return float64(h.v[i])
}

// atLeast raises second sec's value to v.
func (h *history) atLeast(sec int64, v float64) {
	h.set(sec, max(h.at(sec), v))
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
