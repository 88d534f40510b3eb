package topn

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
)

func sum(rows []Row) Values {
	var v Values
	for _, r := range rows {
		v.Add(r.Values)
	}
	return v
}

func near(a, b Values) bool {
	for i := range a {
		if math.Abs(a[i]-b[i]) > 1e-9*math.Max(1, math.Abs(b[i])) {
			return false
		}
	}
	return true
}

func mustNew(t testing.TB, n int, opts ...Option) *Ranking {
	t.Helper()
	r, err := New(n, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// With 100,000 tenants, a window's rows always add up to what was added,
// there are never more than N+1 rows, and the heaviest tenants end up as
// the members.
func TestWindowsExactAndBounded(t *testing.T) {
	const n, tenants = 10, 100_000
	r := mustNew(t, n, WithRankBy(RU))
	rng := rand.New(rand.NewPCG(1, 2))
	z := rand.NewZipf(rng, 1.2, 1, tenants-1)
	var cum Values
	for window := range 12 {
		var want Values
		for range 20000 {
			k := z.Uint64()
			v := Values{float64(k%7) / 1000, 1 + float64(k%3), 1, float64(k % 2), float64(k)}
			if err := r.Add(fmt.Sprintf("t%d", k), v); err != nil {
				t.Fatal(err)
			}
			want.Add(v)
		}
		cum.Add(want)
		rows := r.Cut()
		if len(rows) > n+1 || rows[len(rows)-1].Key != Other {
			t.Fatalf("window %d: %d rows, last %q", window, len(rows), rows[len(rows)-1].Key)
		}
		if got := sum(rows); !near(got, want) {
			t.Fatalf("window %d: rows add up to %v, want %v", window, got, want)
		}
		for i := 1; i < len(rows)-1; i++ {
			if rows[i-1].Values[RU] < rows[i].Values[RU] {
				t.Fatalf("window %d: rows not by RU descending", window)
			}
		}
	}
	// Zipf's heaviest keys are t0, t1, …: after a few reranks they are in.
	members := r.Members()
	for _, k := range []string{"t0", "t1", "t2", "t3", "t4"} {
		if !slices.Contains(members, k) {
			t.Errorf("top tenant %s not a member: %v", k, members)
		}
	}
	if got := len(r.Totals()); got > n+1 {
		t.Fatalf("Totals has %d rows", got)
	}
}

type step struct {
	name    string
	amounts map[string]float64 // DB seconds added in the interval
	members []string           // after the rerank
}

func runSteps(t *testing.T, r *Ranking, steps []step) {
	t.Helper()
	for _, s := range steps {
		keys := make([]string, 0, len(s.amounts))
		for k := range s.amounts {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		var want Values
		for _, k := range keys {
			v := Values{s.amounts[k], 0, 1, 0, 0}
			if err := r.Add(k, v); err != nil {
				t.Fatal(err)
			}
			want.Add(v)
		}
		rows := r.Cut()
		if !near(sum(rows), want) {
			t.Fatalf("%s: rows %v do not add up to %v", s.name, rows, want)
		}
		if got := r.Members(); !slices.Equal(got, s.members) {
			t.Fatalf("%s: members %v, want %v", s.name, got, s.members)
		}
	}
}

// The step table: one rerank per interval t0…t9, fixed amounts, N = 2,
// each interval judged alone.
func TestHysteresisSteps(t *testing.T) {
	r := mustNew(t, 2, WithMargin(1.5), WithMinTenure(2), WithSmoothing(1))
	runSteps(t, r, []step{
		{"t0 first two keys are members at once", map[string]float64{"a": 10, "b": 5, "c": 1}, []string{"a", "b"}},
		{"t1 c slightly above b: inside the margin", map[string]float64{"a": 10, "b": 5, "c": 7}, []string{"a", "b"}},
		{"t2 c just below the margin", map[string]float64{"a": 10, "b": 5, "c": 7.4}, []string{"a", "b"}},
		{"t3 c beyond the margin replaces b", map[string]float64{"a": 10, "b": 5, "c": 8}, []string{"a", "c"}},
		{"t4 b comes back strong: c in tenure, a within margin", map[string]float64{"a": 60, "b": 50, "c": 1}, []string{"a", "c"}},
		{"t5 still in tenure", map[string]float64{"a": 60, "b": 50, "c": 1}, []string{"a", "c"}},
		{"t6 tenure over: b replaces c", map[string]float64{"a": 60, "b": 50, "c": 1}, []string{"a", "b"}},
		{"t7 b and c flap around each other: no change", map[string]float64{"a": 10, "b": 5, "c": 6}, []string{"a", "b"}},
		{"t8", map[string]float64{"a": 10, "b": 6, "c": 5}, []string{"a", "b"}},
		{"t9 two strong newcomers, a silent", map[string]float64{"b": 6, "d": 30, "e": 20}, []string{"d", "e"}},
	})
}

// With smoothing, a member whose load comes in bursts keeps its place
// against a steady challenger of the same average; judged one interval at
// a time it would flap.
func TestSmoothingSteps(t *testing.T) {
	ab, ac := []string{"a", "b"}, []string{"a", "c"}
	bursty := func(want ...[]string) []step {
		return []step{
			{"t0 a and b members, c steady", map[string]float64{"a": 20, "b": 10, "c": 6}, want[0]},
			{"t1 b quiet", map[string]float64{"a": 20, "b": 2, "c": 6}, want[1]},
			{"t2 b busy", map[string]float64{"a": 20, "b": 10, "c": 6}, want[2]},
			{"t3 b quiet", map[string]float64{"a": 20, "b": 2, "c": 6}, want[3]},
		}
	}
	t.Run("one interval flaps", func(t *testing.T) {
		r := mustNew(t, 2, WithMinTenure(0), WithSmoothing(1))
		runSteps(t, r, bursty(ab, ac, ab, ac))
	})
	t.Run("two intervals hold", func(t *testing.T) {
		r := mustNew(t, 2, WithMinTenure(0), WithSmoothing(2))
		runSteps(t, r, bursty(ab, ab, ab, ab))
	})
	t.Run("a steady challenger wins over the ring", func(t *testing.T) {
		r := mustNew(t, 2, WithMinTenure(0), WithSmoothing(3))
		runSteps(t, r, []step{
			{"t0", map[string]float64{"a": 20, "b": 5}, []string{"a", "b"}},
			{"t1 c rises: one interval is not enough", map[string]float64{"a": 20, "b": 5, "c": 9}, []string{"a", "b"}},
			{"t2 two intervals of 9 against b's 15", map[string]float64{"a": 20, "b": 5, "c": 9}, []string{"a", "b"}},
			{"t3 three: 27 > 1.25 × 15", map[string]float64{"a": 20, "b": 5, "c": 9}, []string{"a", "c"}},
		})
	})
}

// A swap keeps both histories in the ring: the newcomer is scored with
// what the sketches saw of it, the leaver's scores go back to the
// sketches, so neither starts from zero.
func TestSwapKeepsHistory(t *testing.T) {
	r := mustNew(t, 1, WithMinTenure(0), WithSmoothing(3))
	a, b := []string{"a"}, []string{"b"}
	runSteps(t, r, []step{
		{"t0", map[string]float64{"a": 10}, a},
		{"t1 b: 30 > 1.25 × 20", map[string]float64{"a": 10, "b": 30}, b},
		{"t2 a 10+10+12 against b 30+10", map[string]float64{"a": 12, "b": 10}, b},
		{"t3 a 10+12+40 against b 30+10+10", map[string]float64{"a": 40, "b": 10}, b},
		{"t4 a 12+40+40 against b 10+10+10", map[string]float64{"a": 40, "b": 10}, a},
	})
	r = mustNew(t, 1, WithMinTenure(0), WithSmoothing(3))
	runSteps(t, r, []step{
		{"t0", map[string]float64{"a": 10}, a},
		{"t1 b: 30 > 1.25 × 20", map[string]float64{"a": 10, "b": 30}, b},
		{"t2 a 10+10+35 against b 30+5: a's member history counts", map[string]float64{"a": 35, "b": 5}, a},
	})
}

// A member replaced by Rerank between Cuts gives its window to Other.
func TestRerankBetweenCutsKeepsWindowExact(t *testing.T) {
	r := mustNew(t, 1, WithMinTenure(0))
	r.Add("a", Values{DBTime: 1})
	r.Rerank()
	r.Add("a", Values{DBTime: 1})
	r.Add("b", Values{DBTime: 9})
	r.Rerank() // b replaces a
	if got := r.Members(); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("members %v", got)
	}
	r.Add("b", Values{DBTime: 4})
	rows := r.Cut()
	want := []Row{{"b", Values{DBTime: 4}}, {Other, Values{DBTime: 11}}}
	if !slices.Equal(rows, want) {
		t.Fatalf("rows %v, want %v", rows, want)
	}
	// a's cumulative row is gone with it; Other's total has what was added
	// while not in a member's row: b's 9 before it became one.
	wantTot := []Row{{"b", Values{DBTime: 4}}, {Other, Values{DBTime: 9}}}
	if tot := r.Totals(); !slices.Equal(tot, wantTot) {
		t.Fatalf("totals %v, want %v", tot, wantTot)
	}
}

func TestKeysThatCannotBeMembers(t *testing.T) {
	r := mustNew(t, 5)
	for _, k := range []string{"", Other, "bad\xff"} {
		if err := r.Add(k, Values{DBTime: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if m := r.Members(); len(m) != 0 {
		t.Fatalf("members %v", m)
	}
	if rows := r.Totals(); len(rows) != 1 || rows[0].Values[DBTime] != 3 {
		t.Fatalf("rows %v", rows)
	}
}

func TestAddRejectsBadValues(t *testing.T) {
	r := mustNew(t, 2)
	r.Add("a", Values{DBTime: 1})
	for _, v := range []Values{{DBTime: -1}, {RU: math.NaN()}, {Bytes: math.Inf(1)}, {Errors: math.Inf(-1)}} {
		if err := r.Add("a", v); !errors.Is(err, ErrValue) {
			t.Errorf("Add(%v) = %v, want ErrValue", v, err)
		}
		if err := r.Add("z", v); !errors.Is(err, ErrValue) {
			t.Errorf("Add(%v) = %v, want ErrValue", v, err)
		}
	}
	want := []Row{{"a", Values{DBTime: 1}}, {Other, Values{}}}
	if got := r.Totals(); !slices.Equal(got, want) {
		t.Fatalf("bad values changed the ranking: %v", got)
	}
	if m := r.Members(); !slices.Equal(m, []string{"a"}) {
		t.Fatalf("a rejected key became a member: %v", m)
	}
}

func TestOptions(t *testing.T) {
	for _, tc := range []struct {
		n    int
		opts []Option
	}{
		{0, nil}, {-1, nil},
		{5, []Option{WithRankBy(-1)}}, {5, []Option{WithRankBy(NumMeasures)}},
		{5, []Option{WithMargin(0.9)}}, {5, []Option{WithMargin(math.NaN())}}, {5, []Option{WithMargin(math.Inf(1))}},
		{5, []Option{WithMinTenure(-1)}},
		{5, []Option{WithCapacity(5)}}, {5, []Option{WithCapacity(1 << 30)}},
		{5, []Option{WithSmoothing(0)}}, {5, []Option{WithSmoothing(65)}},
	} {
		if _, err := New(tc.n, tc.opts...); !errors.Is(err, ErrInvalid) {
			t.Errorf("New(%d, …) = %v, want ErrInvalid", tc.n, err)
		}
	}
	r := mustNew(t, 3, WithRankBy(Bytes), WithMargin(1), WithMinTenure(0), WithCapacity(4))
	if r.N() != 3 || r.RankBy() != Bytes {
		t.Fatal("options not applied")
	}
	if Bytes.String() != "bytes" || Measure(9).String() != "Measure(9)" {
		t.Fatal("Measure.String")
	}
}

func TestConcurrentUse(t *testing.T) {
	r := mustNew(t, 4, WithMinTenure(0))
	var wg sync.WaitGroup
	var mu sync.Mutex
	var got Values
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 5000 {
				r.Add(fmt.Sprintf("k%d", (i*(w+1))%50), Values{1, 1, 1, 1, 1})
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range 50 {
			s := sum(r.Cut())
			mu.Lock()
			got.Add(s)
			mu.Unlock()
			r.Totals()
		}
	}()
	wg.Wait()
	got.Add(sum(r.Cut()))
	if got != (Values{20000, 20000, 20000, 20000, 20000}) {
		t.Fatalf("windows add up to %v", got)
	}
}

func BenchmarkAdd(b *testing.B) {
	r := mustNew(b, 50)
	rng := rand.New(rand.NewPCG(1, 1))
	z := rand.NewZipf(rng, 1.1, 1, 99_999)
	keys := make([]string, 1<<16)
	for i := range keys {
		keys[i] = fmt.Sprintf("tenant-%d", z.Uint64())
	}
	v := Values{0.002, 1, 1, 0, 512}
	for i := 0; b.Loop(); i++ {
		r.Add(keys[i&(len(keys)-1)], v)
		if i&0xffff == 0 {
			r.Cut()
		}
	}
}
