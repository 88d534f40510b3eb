package dashboards_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/qtop-dev/qtop/dashboards"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		expr            string
		metrics, labels []string
	}{
		{`up`, []string{"up"}, nil},
		{`qtop_a_total{tenant="x", tier!~"T0|T1"}`, []string{"qtop_a_total"}, []string{"tenant", "tier"}},
		{`rate(qtop_a_total[5m])`, []string{"qtop_a_total"}, nil},
		{`rate(qtop_a_total[$__rate_interval]) * on (job) group_left (service) qtop_b`, []string{"qtop_a_total", "qtop_b"}, []string{"job", "service"}},
		{`sum by (tenant) (rate(qtop_a_total[5m])) / ignoring (tenant) group_left sum(rate(qtop_a_total[5m]))`, []string{"qtop_a_total"}, []string{"tenant"}},
		{`sum(rate(qtop_a_total[5m])) without (instance)`, []string{"qtop_a_total"}, []string{"instance"}},
		{`SUM BY (le) (rate(x_bucket[5m]))`, []string{"x_bucket"}, []string{"le"}},
		{`histogram_quantile(0.95, sum by (le) (rate(qtop_s_bucket[5m])))`, []string{"qtop_s_bucket"}, []string{"le"}},
		{`max_over_time(qtop_g[1h:1m]) offset 5m`, []string{"qtop_g"}, nil},
		{`qtop_g @ start()`, []string{"qtop_g"}, nil},
		{`qtop:rule:rate5m{tenant!="other"} > 0.5 and ignoring (tenant) (qtop:total > 0.25)`, []string{"qtop:rule:rate5m", "qtop:total"}, []string{"tenant"}},
		{`{__name__="qtop_x", job="a"}`, []string{"qtop_x"}, []string{"job"}},
		{`qtop_x{__name__="qtop_x"}`, []string{"qtop_x"}, nil},
		{`label_replace(qtop_x, "tenant", "$1", "instance", "(.*)")`, []string{"qtop_x"}, []string{"instance", "tenant"}},
		{`label_join(qtop_x, "dst", ",", "a", "b")`, []string{"qtop_x"}, []string{"a", "b", "dst"}},
		{`count_values("qtop_not_a_metric", qtop_x)`, []string{"qtop_x"}, nil},
		{`topk($topn, qtop_x{tier=~"${tier:regex}"}) > bool $threshold`, []string{"qtop_x"}, []string{"tier"}},
		{`vector(1) + scalar(qtop_x) - Inf * NaN + 1e-3 + 0x1f + .5`, []string{"qtop_x"}, nil},
		{"qtop_x # a comment naming qtop_y\n + qtop_z", []string{"qtop_x", "qtop_z"}, nil},
		{`qtop_x{a="}"} unless qtop_y{b='\'{'}`, []string{"qtop_x", "qtop_y"}, []string{"a", "b"}},
		{`atan2(qtop_x, qtop_y)`, nil, nil}, // atan2 is an operator, not a function
		{`qtop_x atan2 qtop_y`, []string{"qtop_x", "qtop_y"}, nil},
		{`vector($ru_capacity)`, nil, nil},
		{`qtop_x[[interval]]`, []string{"qtop_x"}, nil},
	} {
		q, err := dashboards.Parse(tc.expr)
		if tc.expr == `atan2(qtop_x, qtop_y)` {
			if !errors.Is(err, dashboards.ErrSyntax) {
				t.Errorf("Parse(%q) = %v, want ErrSyntax", tc.expr, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("Parse(%q): %v", tc.expr, err)
			continue
		}
		if !slices.Equal(q.Metrics, tc.metrics) && !(len(q.Metrics) == 0 && len(tc.metrics) == 0) {
			t.Errorf("Parse(%q).Metrics = %q, want %q", tc.expr, q.Metrics, tc.metrics)
		}
		if !slices.Equal(q.Labels, tc.labels) && !(len(q.Labels) == 0 && len(tc.labels) == 0) {
			t.Errorf("Parse(%q).Labels = %q, want %q", tc.expr, q.Labels, tc.labels)
		}
	}
}

func TestParseSelectors(t *testing.T) {
	q, err := dashboards.Parse(`histogram_quantile(0.9, sum by (le) (rate(qtop_s_bucket{job="a", le!=""}[5m])))
		/ on (job) group_left deriv(qtop_g[10m]) + qtop_c_total + ({__name__="qtop_n", tier="T1"})`)
	if err != nil {
		t.Fatal(err)
	}
	want := []dashboards.Selector{
		{Metric: "qtop_s_bucket", Labels: []string{"job", "le"}, Func: "rate"},
		{Metric: "qtop_g", Func: "deriv"},
		{Metric: "qtop_c_total"},
		{Metric: "qtop_n", Labels: []string{"tier"}},
	}
	if !slices.EqualFunc(q.Selectors, want, func(a, b dashboards.Selector) bool {
		return a.Metric == b.Metric && a.Func == b.Func && slices.Equal(a.Labels, b.Labels)
	}) {
		t.Errorf("Selectors = %+v, want %+v", q.Selectors, want)
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		expr string
		want error
	}{
		{`rate(qtop_x[5m]`, dashboards.ErrSyntax},
		{`rate(qtop_x[5m]))`, dashboards.ErrSyntax},
		{`qtop_x[5m`, dashboards.ErrSyntax},
		{`qtop_x{a="b"`, dashboards.ErrSyntax},
		{`qtop_x{a="b}`, dashboards.ErrSyntax},
		{`qtop_x}`, dashboards.ErrSyntax},
		{`rte(qtop_x[5m])`, dashboards.ErrSyntax},        // a typo in a function is not a metric
		{`sum tenant (qtop_x)`, dashboards.ErrSyntax},    // neither by nor without
		{`sum by (tenant) qtop_x`, dashboards.ErrSyntax}, // aggregation without its argument
		{`sum by (tenant (qtop_x)`, dashboards.ErrSyntax},
		{`qtop_x, qtop_y`, dashboards.ErrSyntax},
		{`qtop_x ; qtop_y`, dashboards.ErrSyntax},
		{`qtop_x{a=~"b"} / ${x`, dashboards.ErrSyntax},
		{`qtop_x / $`, dashboards.ErrSyntax},
		{`qtop_x{__name__="qtop_y"}`, dashboards.ErrSyntax},
		{`{__name__=~"qtop_.*"}`, dashboards.ErrUnsupported},
		{`{job="a"}`, dashboards.ErrUnsupported}, // reads any metric
		{`{__name__!="qtop_x"}`, dashboards.ErrUnsupported},
	} {
		q, err := dashboards.Parse(tc.expr)
		if !errors.Is(err, tc.want) {
			t.Errorf("Parse(%q) = %+v, %v; want %v", tc.expr, q, err, tc.want)
			continue
		}
		if !strings.HasPrefix(err.Error(), "dashboards: ") {
			t.Errorf("Parse(%q) error %q lacks the package prefix", tc.expr, err)
		}
	}
}

// FuzzParse: Parse never panics, and what it returns as a metric name is
// a valid one that appears in the expression.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`sum by (tenant) (rate(qtop_a_total{tenant!="other"}[5m])) / ignoring (tenant) group_left sum(rate(qtop_a_total[5m]))`,
		`histogram_quantile(0.95, sum by (le) (rate(qtop_s_bucket[$__rate_interval])))`,
		`label_replace(qtop_x, "tenant", "$1", "instance", "(.*)")`,
		`{__name__="qtop_x"} offset 5m @ start()`,
		`topk($topn, qtop_x{tier=~"${tier:regex}"})[1h:1m]`,
		"qtop_x # c\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, expr string) {
		q, err := dashboards.Parse(expr)
		if err != nil {
			if !errors.Is(err, dashboards.ErrSyntax) && !errors.Is(err, dashboards.ErrUnsupported) {
				t.Fatalf("Parse(%q): unexpected error %v", expr, err)
			}
			return
		}
		for _, m := range q.Metrics {
			if m == "" || !strings.Contains(expr, m) {
				t.Fatalf("Parse(%q): metric %q not in the expression", expr, m)
			}
			for i := 0; i < len(m); i++ {
				c := m[i]
				if !(c == '_' || c == ':' || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || ('0' <= c && c <= '9' && i > 0)) {
					t.Fatalf("Parse(%q): metric %q is not a valid name", expr, m)
				}
			}
		}
		for _, s := range q.Selectors {
			if _, ok := slices.BinarySearch(q.Metrics, s.Metric); !ok {
				t.Fatalf("Parse(%q): selector %+v not among the metrics %q", expr, s, q.Metrics)
			}
		}
		if !slices.IsSorted(q.Metrics) || !slices.IsSorted(q.Labels) {
			t.Fatalf("Parse(%q): unsorted result %+v", expr, q)
		}
	})
}
