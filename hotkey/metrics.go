package hotkey

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Statser is what NewMetrics reads: any *Guard.
type Statser interface{ Stats() Stats }

type metrics struct {
	g     Statser
	descs [7]*prometheus.Desc
}

// NewMetrics registers the counters of a guard on reg as
// qtop_enforce_hotkey_*, labelled guard=name.
func NewMetrics(reg prometheus.Registerer, name string, g Statser) error {
	if reg == nil || g == nil {
		return fmt.Errorf("%w: nil registerer or guard", ErrConfig)
	}
	l := prometheus.Labels{"guard": name}
	d := func(n, help string) *prometheus.Desc {
		return prometheus.NewDesc("qtop_enforce_hotkey_"+n, help, nil, l)
	}
	m := &metrics{g: g, descs: [7]*prometheus.Desc{
		d("misses_total", "Requests not served from the hot-key cache."),
		d("loads_total", "Loads sent to the backend."),
		d("coalesced_total", "Misses that joined a load in flight."),
		d("left_total", "Waiters whose context ended before the load."),
		d("panics_total", "Loads that panicked."),
		d("cached_total", "Hot keys stored in the cache."),
		d("entries", "Hot keys in the cache now."),
	}}
	if err := reg.Register(m); err != nil {
		return fmt.Errorf("hotkey: register metrics: %w", err)
	}
	return nil
}

func (m *metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range m.descs {
		ch <- d
	}
}

func (m *metrics) Collect(ch chan<- prometheus.Metric) {
	s := m.g.Stats()
	for i, v := range []uint64{s.Misses, s.Loads, s.Coalesced, s.Left, s.Panics, s.Cached} {
		ch <- prometheus.MustNewConstMetric(m.descs[i], prometheus.CounterValue, float64(v))
	}
	ch <- prometheus.MustNewConstMetric(m.descs[6], prometheus.GaugeValue, float64(s.Entries))
}
