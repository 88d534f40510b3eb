package freshness

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/qtop-dev/qtop/report"
)

// Bounds of the freshness section of a report.
const (
	MaxReportSamples = 1 << 16
	MaxReportStrings = 1024
	MaxReportRoutes  = 1024
	MaxReportRules   = 4096
)

var _ report.Section = Window{}

// SectionTag implements report.Section: a Window is section 3 of a
// report,
//
//	u nstrings | strings | u nsamples | nsamples × (u route, 8 caller, 8 response, v unix ns)
//	| u dropped | u nroutes | nroutes × (u route, u requests, u revalidated)
//	| u nrules | nrules × (u rule, u route, u matched, u served, u right, u wrong)
//
// with routes and rules as indexes into the section's own string table.
func (Window) SectionTag() uint64 { return 3 }

// AppendSection implements report.Section.
func (w Window) AppendSection(b []byte) ([]byte, error) {
	switch {
	case len(w.Samples) > MaxReportSamples:
		return nil, fmt.Errorf("%w: %d freshness samples, at most %d", report.ErrTooLarge, len(w.Samples), MaxReportSamples)
	case len(w.Routes) > MaxReportRoutes:
		return nil, fmt.Errorf("%w: %d freshness routes, at most %d", report.ErrTooLarge, len(w.Routes), MaxReportRoutes)
	case len(w.Rules) > MaxReportRules:
		return nil, fmt.Errorf("%w: %d freshness rules, at most %d", report.ErrTooLarge, len(w.Rules), MaxReportRules)
	}
	table, index, err := w.strings()
	if err != nil {
		return nil, err
	}
	b = binary.AppendUvarint(b, uint64(len(table)))
	for _, s := range table {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	b = binary.AppendUvarint(b, uint64(len(w.Samples)))
	for _, s := range w.Samples {
		b = binary.AppendUvarint(b, index[s.Route])
		b = binary.LittleEndian.AppendUint64(b, s.Caller)
		b = binary.LittleEndian.AppendUint64(b, s.Response)
		b = binary.AppendVarint(b, s.At.UnixNano())
	}
	b = binary.AppendUvarint(b, w.SamplesDropped)
	b = binary.AppendUvarint(b, uint64(len(w.Routes)))
	for _, x := range w.Routes {
		b = binary.AppendUvarint(b, index[x.Route])
		b = binary.AppendUvarint(b, x.Requests)
		b = binary.AppendUvarint(b, x.Revalidated)
	}
	b = binary.AppendUvarint(b, uint64(len(w.Rules)))
	for _, x := range w.Rules {
		b = binary.AppendUvarint(b, index[x.Rule])
		b = binary.AppendUvarint(b, index[x.Route])
		for _, v := range [...]uint64{x.Matched, x.Served, x.Right, x.Wrong} {
			b = binary.AppendUvarint(b, v)
		}
	}
	return b, nil
}

// strings is the section's string table: every route and rule once, in
// order of first use.
func (w Window) strings() ([]string, map[string]uint64, error) {
	index := map[string]uint64{}
	var table []string
	add := func(s string) error {
		if _, ok := index[s]; ok {
			return nil
		}
		if len(s) > report.MaxStringLen {
			return fmt.Errorf("%w: freshness string of %d bytes, at most %d", report.ErrInvalid, len(s), report.MaxStringLen)
		}
		if len(table) >= MaxReportStrings {
			return fmt.Errorf("%w: more than %d freshness routes and rules", report.ErrTooLarge, MaxReportStrings)
		}
		index[s] = uint64(len(table))
		table = append(table, s)
		return nil
	}
	var names []string
	for _, s := range w.Samples {
		names = append(names, s.Route)
	}
	for _, x := range w.Routes {
		names = append(names, x.Route)
	}
	for _, x := range w.Rules {
		names = append(names, x.Rule, x.Route)
	}
	for _, s := range names {
		if err := add(s); err != nil {
			return nil, nil, err
		}
	}
	return table, index, nil
}

// DecodeSection implements report.Section.
func (Window) DecodeSection(d *report.Reader) report.Section {
	table := make([]string, d.Count("freshness strings", MaxReportStrings, 1))
	for i := range table {
		table[i] = d.String("freshness string")
	}
	ref := func(what string) string {
		i := d.Uvarint(what)
		if d.Err() == nil && i >= uint64(len(table)) {
			d.Fail(fmt.Errorf("%w: %s refers to string %d of %d", report.ErrMalformed, what, i, len(table)))
		}
		if d.Err() != nil {
			return ""
		}
		return table[i]
	}
	var w Window
	if n := d.Count("freshness samples", MaxReportSamples, 1+8+8+1); n > 0 {
		w.Samples = make([]Sample, n)
		for i := range w.Samples {
			s := &w.Samples[i]
			s.Route = ref("sample route")
			s.Caller = d.Fixed64("sample caller")
			s.Response = d.Fixed64("sample response")
			if d.Err() != nil {
				return nil
			}
			s.At = time.Unix(0, d.Varint("sample time")).UTC()
		}
	}
	w.SamplesDropped = d.Uvarint("samples dropped")
	if n := d.Count("freshness routes", MaxReportRoutes, 3); n > 0 {
		w.Routes = make([]RouteCount, n)
		for i := range w.Routes {
			x := &w.Routes[i]
			x.Route = ref("freshness route")
			x.Requests = d.Uvarint("route requests")
			x.Revalidated = d.Uvarint("route revalidated")
		}
	}
	if n := d.Count("freshness rules", MaxReportRules, 6); n > 0 {
		w.Rules = make([]RuleCount, n)
		for i := range w.Rules {
			x := &w.Rules[i]
			x.Rule = ref("freshness rule")
			x.Route = ref("freshness rule route")
			x.Matched = d.Uvarint("rule matched")
			x.Served = d.Uvarint("rule served")
			x.Right = d.Uvarint("rule right")
			x.Wrong = d.Uvarint("rule wrong")
		}
	}
	if d.Err() != nil {
		return nil
	}
	return w
}

// Source returns a function for meter.WithSectionSource: each call drains
// s's window into a report section (nil when nothing happened).
func Source(s *Shedder) func() report.Section {
	return func() report.Section {
		w := s.Drain()
		if w.Empty() {
			return nil
		}
		return w
	}
}
