package topn

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/qtop-dev/qtop/spacesaving"
)

// Other is the key of the row that holds everything not in a member's row.
// A key equal to Other is never a member; its load goes to that row.
const Other = "other"

// Errors; test with errors.Is.
var (
	ErrInvalid = errors.New("topn: invalid option")
	ErrValue   = errors.New("topn: value is negative or not finite")
)

// Measure is one of the quantities a Ranking adds up per key.
type Measure int

// The measures, in the order of Values.
const (
	DBTime   Measure = iota // database time, seconds
	RU                      // request units
	Requests                // units of work
	Errors                  // units of work that failed
	Bytes                   // bytes read and written
)

// NumMeasures is the number of measures in Values.
const NumMeasures = 5

var measureNames = [NumMeasures]string{"db_seconds", "ru", "requests", "errors", "bytes"}

// String returns a short snake_case name of the measure, such as "db_seconds".
func (m Measure) String() string {
	if m < 0 || int(m) >= NumMeasures {
		return fmt.Sprintf("Measure(%d)", int(m))
	}
	return measureNames[m]
}

// Values holds one amount per Measure, indexed by Measure.
type Values [NumMeasures]float64

// Add adds o to v.
func (v *Values) Add(o Values) {
	for i := range v {
		v[i] += o[i]
	}
}

func (v Values) valid() bool {
	for _, x := range v {
		if !(x >= 0) || math.IsInf(x, 1) {
			return false
		}
	}
	return true
}

// Row is one line of a ranking: a member, or Other.
type Row struct {
	Key    string
	Values Values
}

// Option configures New.
type Option func(*config)

type config struct {
	n        int
	rankBy   Measure
	margin   float64
	tenure   int
	capacity int
	smooth   int
}

// WithRankBy sets the measure that ranks keys (default DBTime).
func WithRankBy(m Measure) Option { return func(c *config) { c.rankBy = m } }

// WithMargin sets how many times the weakest member's interval amount a
// challenger must reach to replace it (default 1.25; at least 1).
func WithMargin(f float64) Option { return func(c *config) { c.margin = f } }

// WithMinTenure sets how many reranks a new member stays before it can be
// replaced (default 3; 0 disables).
func WithMinTenure(k int) Option { return func(c *config) { c.tenure = k } }

// WithSmoothing sets over how many reranks, the current one included,
// keys are scored (default 3; at least 1). A key whose load alternates
// between busy and quiet intervals is then judged by its sum, not by its
// last interval. Each interval keeps its own challenger sketch.
func WithSmoothing(k int) Option { return func(c *config) { c.smooth = k } }

// WithCapacity sets the capacity of the sketch that finds challengers
// (default max(8N, 64)); at least N+1.
func WithCapacity(k int) Option { return func(c *config) { c.capacity = k } }

func (c *config) validate() error {
	switch {
	case c.n < 1 || c.n > spacesaving.MaxCapacity/8:
		return fmt.Errorf("%w: N = %d", ErrInvalid, c.n)
	case c.rankBy < 0 || int(c.rankBy) >= NumMeasures:
		return fmt.Errorf("%w: rank by %v", ErrInvalid, c.rankBy)
	case !(c.margin >= 1) || math.IsInf(c.margin, 1):
		return fmt.Errorf("%w: margin %v", ErrInvalid, c.margin)
	case c.tenure < 0:
		return fmt.Errorf("%w: tenure %d", ErrInvalid, c.tenure)
	case c.capacity <= c.n || c.capacity > spacesaving.MaxCapacity:
		return fmt.Errorf("%w: capacity %d for N = %d", ErrInvalid, c.capacity, c.n)
	case c.smooth < 1 || c.smooth > 64:
		return fmt.Errorf("%w: smoothing over %d reranks", ErrInvalid, c.smooth)
	}
	return nil
}

// Ranking keeps at most N members and an Other row. It is safe for
// concurrent use.
type Ranking struct {
	cfg config

	mu      sync.Mutex
	members map[string]*member
	total   Values                // cumulative Other
	window  Values                // Other since the last Cut
	sketch  []*spacesaving.Sketch // one per interval of the smoothing ring
	cur     int                   // the current interval in the ring
	reranks int
}

type member struct {
	total  Values    // since it became a member
	window Values    // since the last Cut
	score  []float64 // rank measure per interval of the ring
	since  int       // reranks count when admitted
}

// New returns an empty ranking of at most n members.
func New(n int, opts ...Option) (*Ranking, error) {
	cfg := config{n: n, rankBy: DBTime, margin: 1.25, tenure: 3, smooth: 3}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.capacity == 0 {
		cfg.capacity = max(8*n, 64)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	r := &Ranking{cfg: cfg, members: make(map[string]*member, n)}
	for range cfg.smooth {
		r.sketch = append(r.sketch, spacesaving.New(cfg.capacity))
	}
	return r, nil
}

// N returns the most members the ranking names.
func (r *Ranking) N() int { return r.cfg.n }

// RankBy returns the measure that ranks keys.
func (r *Ranking) RankBy() Measure { return r.cfg.rankBy }

// memberKey reports whether key may be a member: not Other, not empty,
// valid UTF-8 (it becomes a label value).
func memberKey(key string) bool {
	return key != "" && key != Other && utf8.ValidString(key)
}

// weight converts an amount of the rank measure to sketch units
// (millionths), saturating.
func weight(x float64) uint64 {
	const scale = 1e6
	if x*scale >= 1<<63 {
		return 1 << 63
	}
	return uint64(x*scale + 0.5)
}

// Add adds v to key's row, or to Other's if key is not a member. Values
// that are negative, NaN or infinite are rejected with ErrValue and change
// nothing. A key that cannot be a label value (empty, invalid UTF-8) or
// that equals Other is counted in Other.
func (r *Ranking) Add(key string, v Values) error {
	if !v.valid() {
		return fmt.Errorf("%w: %q: %v", ErrValue, key, v)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !memberKey(key) {
		r.total.Add(v)
		r.window.Add(v)
		return nil
	}
	m := r.members[key]
	if m == nil && len(r.members) < r.cfg.n {
		m = r.newMember(r.reranks)
		r.members[key] = m
	}
	if m != nil {
		m.total.Add(v)
		m.window.Add(v)
		m.score[r.cur] += v[r.cfg.rankBy]
		return nil
	}
	r.total.Add(v)
	r.window.Add(v)
	// Members are scored exactly; only the others need the sketch, which
	// then spends all of its capacity on finding challengers.
	r.sketch[r.cur].Add(key, weight(v[r.cfg.rankBy]))
	return nil
}

func (r *Ranking) newMember(since int) *member {
	return &member{since: since, score: make([]float64, r.cfg.smooth)}
}

func sumOf(xs []float64) float64 {
	var t float64
	for _, x := range xs {
		t += x
	}
	return t
}

// Rerank revisits membership with the amounts added since the last
// Rerank: the best challengers replace the weakest members they outrank
// by the margin, among members past their tenure. A replaced member's
// window amounts move to Other, so windows still add up. Call it once per
// interval (Cut does).
func (r *Ranking) Rerank() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rerank()
}

func (r *Ranking) rerank() {
	defer func() {
		r.cur = (r.cur + 1) % len(r.sketch)
		r.sketch[r.cur].Reset()
		for _, m := range r.members {
			m.score[r.cur] = 0
		}
		r.reranks++
	}()
	if len(r.members) < r.cfg.n {
		return
	}
	type cand struct {
		key   string
		score float64
	}
	// A challenger's score is the sum of its lower bounds over the ring:
	// it is never promoted on a sketch's error.
	lower := map[string]uint64{}
	for _, sk := range r.sketch {
		for _, c := range sk.Top(-1) {
			if _, ok := r.members[c.Key]; !ok {
				lower[c.Key] += c.Count - c.Err
			}
		}
	}
	challengers := make([]cand, 0, len(lower))
	for k, l := range lower {
		if l > 0 {
			challengers = append(challengers, cand{k, float64(l) / 1e6})
		}
	}
	if len(challengers) == 0 {
		return
	}
	slices.SortFunc(challengers, func(a, b cand) int {
		if a.score != b.score {
			if a.score > b.score {
				return -1
			}
			return 1
		}
		return strings.Compare(a.key, b.key)
	})
	var weak []cand
	for k, m := range r.members {
		if r.reranks-m.since >= r.cfg.tenure {
			weak = append(weak, cand{k, sumOf(m.score)})
		}
	}
	slices.SortFunc(weak, func(a, b cand) int {
		if a.score != b.score {
			if a.score < b.score {
				return -1
			}
			return 1
		}
		return strings.Compare(b.key, a.key)
	})
	for i, c := range challengers {
		if i >= len(weak) || !(c.score > r.cfg.margin*weak[i].score) {
			break
		}
		out := r.members[weak[i].key]
		r.window.Add(out.window)
		delete(r.members, weak[i].key)
		// Each keeps its history in the ring: the newcomer's lower bounds
		// become its scores, the leaver's scores go to the sketches.
		in := r.newMember(r.reranks + 1)
		for j, sk := range r.sketch {
			if count, errb, ok := sk.Estimate(c.key); ok {
				in.score[j] = float64(count-errb) / 1e6
			}
			sk.Add(weak[i].key, weight(out.score[j]))
		}
		r.members[c.key] = in
	}
}

// Cut returns the rows of the window since the last Cut — members by the
// rank measure, descending, then Other — starts a new window and reranks.
// The rows add up to everything added in the window.
func (r *Ranking) Cut() []Row {
	r.mu.Lock()
	defer r.mu.Unlock()
	rows := r.rows(func(m *member) Values { return m.window }, r.window)
	for _, m := range r.members {
		m.window = Values{}
	}
	r.window = Values{}
	r.rerank()
	return rows
}

// Totals returns the cumulative rows: each member's amounts since it
// became a member, by the rank measure, descending, then Other with
// everything added while not in a member's row.
func (r *Ranking) Totals() []Row {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.rows(func(m *member) Values { return m.total }, r.total)
}

// Members returns the keys of the members, sorted.
func (r *Ranking) Members() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	keys := make([]string, 0, len(r.members))
	for k := range r.members {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func (r *Ranking) rows(pick func(*member) Values, other Values) []Row {
	rows := make([]Row, 0, len(r.members)+1)
	for k, m := range r.members {
		rows = append(rows, Row{k, pick(m)})
	}
	rb := r.cfg.rankBy
	slices.SortFunc(rows, func(a, b Row) int {
		if x, y := a.Values[rb], b.Values[rb]; x != y {
			if x > y {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Key, b.Key)
	})
	return append(rows, Row{Other, other})
}
