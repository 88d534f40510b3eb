package collector

import (
	"cmp"
	"slices"
	"strings"

	"github.com/qtop-dev/qtop/report"
	"github.com/qtop-dev/qtop/spacesaving"
)

// The live view tracks at most Config.MaxTenants tenants; the rows of a
// tenant beyond them are counted under its shard's "other". Tenants come
// and go (prune forgets one idle for longer than any view shows), but at
// 100,000 tenants all busy the view would stay with whichever it saw
// first, and a tenant turning noisy later — the one to find — would be
// part of "other" for good. So each shard counts, by RU, the tenants it
// folds into "other" (a Space-Saving sketch of candCapacity, counted
// afresh every second), and once a second the heaviest of them, across
// shards, take the places of the lightest live tenants over the same
// seconds, each only with promoteRatio times its RU (tenants of like load
// do not swap places every second). A promoted tenant shows from its next
// row; what it did before is in "other", as is what the tenant whose place
// it took did.
const (
	candCapacity = 16
	// promoteMax: at most this many tenants are promoted a second.
	promoteMax   = 16
	promoteRatio = 2
)

// candidate counts ru of tenant name, whose row was folded into "other".
// The shard's lock is held.
func (sh *shard) candidate(name string, ru float64) {
	w := ruUnits(ru)
	if w == 0 {
		return
	}
	if sh.cands == nil {
		sh.cands = spacesaving.New(candCapacity)
	}
	sh.cands.Add(name, w)
}

// ruUnits is ru in the sketch's integer weight: thousandths of an RU.
func ruUnits(ru float64) uint64 {
	if !(ru > 0) {
		return 0
	}
	return uint64(min(ru*1000, 1<<53))
}

// lightTenant is a live tenant and its RU since the candidates were
// counted from.
type lightTenant struct {
	name  string
	tl    *tenantLive
	w     uint64
	shard int
}

// candidates are, across shards, the heaviest tenants folded into "other"
// since they were last counted, and the lightest live tenants over the
// same seconds.
type candidates struct {
	full  bool // the view holds its maximum of tenants
	top   []spacesaving.Counter
	shard []int         // top[i]'s shard
	light []lightTenant // lightest first
}

// collect adds shard i's heaviest folded tenants since sh.candFrom and
// its lightest live tenants over the same seconds to c, then counts
// afresh from sec. The shard's lock is held.
func (sh *shard) collect(i int, sec int64, c *candidates) {
	from := sh.candFrom
	sh.candFrom = sec
	if sh.cands != nil && sh.cands.Total() > 0 {
		for _, k := range sh.cands.Top(promoteMax) {
			if _, live := sh.tenants[k.Key]; !live {
				k.Key = strings.Clone(k.Key) // not the report's string table
				c.top = append(c.top, k)
				c.shard = append(c.shard, i)
			}
		}
		sh.cands.Reset()
	}
	if c.full {
		c.light = sh.lightest(i, from, sec, c.light)
	}
}

// lightest keeps in light (lightest first, at most promoteMax) the live
// tenants of shard i ("other" aside) with the least RU in the seconds
// from..to.
func (sh *shard) lightest(i int, from, to int64, light []lightTenant) []lightTenant {
	for name, tl := range sh.tenants {
		if tl.other {
			continue
		}
		w := ruUnits(tl.w.ruSince(from, to))
		if len(light) == promoteMax && w >= light[promoteMax-1].w {
			continue
		}
		j := len(light)
		for j > 0 && light[j-1].w > w {
			j--
		}
		light = append(light, lightTenant{})
		copy(light[j+1:], light[j:])
		light[j] = lightTenant{name, tl, w, i}
		if len(light) > promoteMax {
			light = light[:promoteMax]
		}
	}
	return light
}

// promote moves the heaviest of c.top into the live view in place of the
// lightest of c.light, each only with promoteRatio times its RU (see
// candCapacity). It takes one shard's lock at a time.
func (g *aggregator) promote(c *candidates) {
	if len(c.top) == 0 {
		return
	}
	order := make([]int, len(c.top))
	for i := range order {
		order[i] = i
	}
	low := func(k spacesaving.Counter) uint64 { return k.Count - k.Err }
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(low(c.top[b]), low(c.top[a])) })
	for n, i := range order {
		k := c.top[i]
		if n >= len(c.light) || low(k) <= promoteRatio*c.light[n].w {
			return // the candidates are heaviest first, the live tenants lightest first
		}
		lt := c.light[n]
		sh := &g.shards[lt.shard]
		sh.mu.Lock()
		if sh.tenants[lt.name] == lt.tl {
			// What the tenant did stays in the view's sums, under "other".
			lt.tl.w.addTo(&sh.tenant(g, report.OtherTenant).w)
			sh.forget(g, lt.name, lt.tl)
		}
		sh.mu.Unlock()
		sh = &g.shards[c.shard[i]]
		sh.mu.Lock()
		if sh.tenants[k.Key] == nil {
			g.tenants.Add(1)
			sh.tenants[k.Key] = &tenantLive{routes: make(map[string]*window10), seen: sh.candFrom}
			g.met.tenantPromoted.Inc()
		}
		sh.mu.Unlock()
	}
}

// ruSince is the RU of the seconds from..to the ring still holds.
func (c *counts10) ruSince(from, to int64) float64 {
	var sum float64
	for i, s := range c.stamp {
		if s >= from && s <= to && s != 0 {
			sum += c.ru[i]
		}
	}
	return sum
}

// addTo adds the seconds of c that dst's ring can still hold to dst.
func (c *counts10) addTo(dst *counts10) {
	for i, s := range c.stamp {
		if s == 0 || dst.stamp[i] > s {
			continue // empty, or older than what dst holds there
		}
		j := dst.slot(s)
		dst.ru[j] = finiteSum(dst.ru[j], c.ru[i])
		dst.db[j] = finiteSum(dst.db[j], c.db[i])
		dst.pg[j] += c.pg[i]
		dst.req[j] += c.req[i]
		dst.err[j] += c.err[i]
	}
}
