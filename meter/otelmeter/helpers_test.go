package otelmeter

import (
	"time"

	"github.com/qtop-dev/qtop/meter"
	"github.com/qtop-dev/qtop/report"
)

var t0 = time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)

func fixedClock(t time.Time) meter.Option {
	return meter.WithClock(func() time.Time { return t })
}

func rowsByKey(rep *report.Report) map[string]report.Row {
	m := make(map[string]report.Row, len(rep.Rows))
	for _, r := range rep.Rows {
		k := r.Tenant + "|" + r.Route + "|" + r.Kind.String()
		if _, dup := m[k]; dup {
			panic("duplicate row " + k)
		}
		m[k] = r
	}
	return m
}

func mustRecorder(opts ...meter.RecorderOption) *meter.Recorder {
	r, err := meter.NewRecorder(opts...)
	if err != nil {
		panic(err)
	}
	return r
}

func mustSpanProcessor(rec *meter.Recorder, opts ...Option) *SpanProcessor {
	p, err := NewSpanProcessor(rec, opts...)
	if err != nil {
		panic(err)
	}
	return p
}
