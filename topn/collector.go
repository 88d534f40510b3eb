package topn

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/model"
)

// Metric names a counter family exported for one measure, for example
// {Measure: DBTime, Name: "qtop_collector_tenant_db_seconds_total"}.
type Metric struct {
	Measure Measure
	Name    string
	Help    string
}

// Collector exports a Ranking's cumulative rows (Totals) as counters:
// for each Metric, one series per member plus one for Other, labelled with
// the caller's label. Series per metric never exceed N+1. A member that
// is replaced stops being exported; a key that becomes a member again
// starts from zero, which Prometheus reads as a counter reset.
type Collector struct {
	r     *Ranking
	ms    []Metric
	descs []*prometheus.Desc
}

var _ prometheus.Collector = (*Collector)(nil)

// NewCollector builds a Collector for r and registers it on reg. Wrap reg
// with prometheus.WrapRegistererWith to add constant labels.
func NewCollector(reg prometheus.Registerer, r *Ranking, label string, metrics ...Metric) (*Collector, error) {
	if reg == nil || r == nil {
		return nil, fmt.Errorf("%w: nil registerer or ranking", ErrInvalid)
	}
	if !model.LegacyValidation.IsValidLabelName(label) {
		return nil, fmt.Errorf("%w: label name %q", ErrInvalid, label)
	}
	if len(metrics) == 0 {
		return nil, fmt.Errorf("%w: no metrics", ErrInvalid)
	}
	c := &Collector{r: r}
	for _, m := range metrics {
		if m.Measure < 0 || int(m.Measure) >= NumMeasures {
			return nil, fmt.Errorf("%w: measure %v", ErrInvalid, m.Measure)
		}
		if !model.LegacyValidation.IsValidMetricName(m.Name) {
			return nil, fmt.Errorf("%w: metric name %q", ErrInvalid, m.Name)
		}
		help := m.Help
		if help == "" {
			help = fmt.Sprintf("%s by %s, top %d and %q.", m.Measure, label, r.N(), Other)
		}
		c.ms = append(c.ms, m)
		c.descs = append(c.descs, prometheus.NewDesc(m.Name, help, []string{label}, nil))
	}
	if err := reg.Register(c); err != nil {
		return nil, fmt.Errorf("topn: register: %w", err)
	}
	return c, nil
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	rows := c.r.Totals()
	for i, m := range c.ms {
		for _, row := range rows {
			ch <- prometheus.MustNewConstMetric(c.descs[i], prometheus.CounterValue, row.Values[m.Measure], row.Key)
		}
	}
}
