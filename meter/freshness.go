package meter

import (
	"encoding/binary"
	"fmt"
	"time"
)

// Freshness is what a process's freshness middleware (enforce.Freshness)
// saw in a report's window: waste samples of sampled callers, GETs per
// route, and per freshness rule and route the GETs it matched, the 304s
// it served and its shadow verdicts. It travels in section 3 of the
// report. A sample holds hashes only: never a response, never a caller.
type Freshness struct {
	Samples        []FreshSample
	SamplesDropped uint64
	Routes         []FreshRoute
	Rules          []FreshRule
}

// FreshSample is one sampled GET: route, keyed caller hash, response hash
// and time.
type FreshSample struct {
	At       time.Time
	Route    string
	Caller   uint64
	Response uint64
}

// FreshRoute is one route's GETs, and those revalidated (304 after the
// handler ran because the response equalled the client's copy).
type FreshRoute struct {
	Route                 string
	Requests, Revalidated uint64
}

// FreshRule is one freshness rule on one route: GETs matched, 304s
// served without the handler, and shadow verdicts (Right: the new
// response equalled the client's copy).
type FreshRule struct {
	Rule, Route                   string
	Matched, Served, Right, Wrong uint64
}

// Bounds of the freshness section.
const (
	MaxFreshSamples = 1 << 16
	MaxFreshStrings = 1024
	MaxFreshRoutes  = 1024
	MaxFreshRules   = 4096
)

// Section 3 is
//
//	u nstrings | strings | u nsamples | nsamples × (u route, 8 caller, 8 response, v unix ns)
//	| u dropped | u nroutes | nroutes × (u route, u requests, u revalidated)
//	| u nrules | nrules × (u rule, u route, u matched, u served, u right, u wrong)
//
// with routes and rules as indexes into the section's own string table.
var freshnessSection = section{
	tag:  3,
	name: "freshness",
	has: func(r *Report) bool {
		f := r.Freshness
		return f != nil && (len(f.Samples) > 0 || f.SamplesDropped > 0 || len(f.Routes) > 0 || len(f.Rules) > 0)
	},
	appendTo: appendFreshness,
	decode:   decodeFreshness,
}

func appendFreshness(b []byte, r *Report) ([]byte, error) {
	f := r.Freshness
	switch {
	case len(f.Samples) > MaxFreshSamples:
		return nil, fmt.Errorf("%w: %d freshness samples, at most %d", ErrTooLarge, len(f.Samples), MaxFreshSamples)
	case len(f.Routes) > MaxFreshRoutes:
		return nil, fmt.Errorf("%w: %d freshness routes, at most %d", ErrTooLarge, len(f.Routes), MaxFreshRoutes)
	case len(f.Rules) > MaxFreshRules:
		return nil, fmt.Errorf("%w: %d freshness rules, at most %d", ErrTooLarge, len(f.Rules), MaxFreshRules)
	}
	index := map[string]uint64{}
	var table []string
	add := func(s string) error {
		if _, ok := index[s]; ok {
			return nil
		}
		if len(s) > MaxStringLen {
			return fmt.Errorf("%w: freshness string of %d bytes, at most %d", ErrInvalid, len(s), MaxStringLen)
		}
		if len(table) >= MaxFreshStrings {
			return fmt.Errorf("%w: more than %d freshness routes and rules", ErrTooLarge, MaxFreshStrings)
		}
		index[s] = uint64(len(table))
		table = append(table, s)
		return nil
	}
	for _, s := range f.Samples {
		if err := add(s.Route); err != nil {
			return nil, err
		}
	}
	for _, x := range f.Routes {
		if err := add(x.Route); err != nil {
			return nil, err
		}
	}
	for _, x := range f.Rules {
		if err := add(x.Rule); err != nil {
			return nil, err
		}
		if err := add(x.Route); err != nil {
			return nil, err
		}
	}
	b = binary.AppendUvarint(b, uint64(len(table)))
	for _, s := range table {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	b = binary.AppendUvarint(b, uint64(len(f.Samples)))
	for _, s := range f.Samples {
		b = binary.AppendUvarint(b, index[s.Route])
		b = binary.LittleEndian.AppendUint64(b, s.Caller)
		b = binary.LittleEndian.AppendUint64(b, s.Response)
		b = binary.AppendVarint(b, s.At.UnixNano())
	}
	b = binary.AppendUvarint(b, f.SamplesDropped)
	b = binary.AppendUvarint(b, uint64(len(f.Routes)))
	for _, x := range f.Routes {
		b = binary.AppendUvarint(b, index[x.Route])
		b = binary.AppendUvarint(b, x.Requests)
		b = binary.AppendUvarint(b, x.Revalidated)
	}
	b = binary.AppendUvarint(b, uint64(len(f.Rules)))
	for _, x := range f.Rules {
		b = binary.AppendUvarint(b, index[x.Rule])
		b = binary.AppendUvarint(b, index[x.Route])
		for _, v := range [...]uint64{x.Matched, x.Served, x.Right, x.Wrong} {
			b = binary.AppendUvarint(b, v)
		}
	}
	return b, nil
}

func decodeFreshness(d *decoder, r *Report) {
	table := make([]string, d.count("freshness strings", MaxFreshStrings, 1))
	for i := range table {
		table[i] = d.string("freshness string")
	}
	ref := func(what string) string {
		i := d.uvarint(what)
		if d.err == nil && i >= uint64(len(table)) {
			d.fail(fmt.Errorf("%w: %s refers to string %d of %d", ErrMalformed, what, i, len(table)))
		}
		if d.err != nil {
			return ""
		}
		return table[i]
	}
	f := &Freshness{}
	if n := d.count("freshness samples", MaxFreshSamples, 1+8+8+1); n > 0 {
		f.Samples = make([]FreshSample, n)
		for i := range f.Samples {
			s := &f.Samples[i]
			s.Route = ref("sample route")
			s.Caller = d.fixed64("sample caller")
			s.Response = d.fixed64("sample response")
			if d.err != nil {
				return
			}
			s.At = time.Unix(0, d.varint("sample time")).UTC()
		}
	}
	f.SamplesDropped = d.uvarint("samples dropped")
	if n := d.count("freshness routes", MaxFreshRoutes, 3); n > 0 {
		f.Routes = make([]FreshRoute, n)
		for i := range f.Routes {
			x := &f.Routes[i]
			x.Route = ref("freshness route")
			x.Requests = d.uvarint("route requests")
			x.Revalidated = d.uvarint("route revalidated")
		}
	}
	if n := d.count("freshness rules", MaxFreshRules, 6); n > 0 {
		f.Rules = make([]FreshRule, n)
		for i := range f.Rules {
			x := &f.Rules[i]
			x.Rule = ref("freshness rule")
			x.Route = ref("freshness rule route")
			x.Matched = d.uvarint("rule matched")
			x.Served = d.uvarint("rule served")
			x.Right = d.uvarint("rule right")
			x.Wrong = d.uvarint("rule wrong")
		}
	}
	if d.err == nil {
		r.Freshness = f
	}
}

// WithFreshnessSource has the Reporter fill each report's Freshness with
// fn's window (fn returns what happened since its previous call, nil when
// nothing did).
func WithFreshnessSource(fn func() *Freshness) ReporterOption {
	return reporterOption(func(c *config) { c.freshness = fn })
}

// fixed64 reads 8 little-endian bytes (0 after a failure).
func (d *decoder) fixed64(what string) uint64 {
	if p := d.bytes(8, what); d.err == nil && len(p) == 8 {
		return binary.LittleEndian.Uint64(p)
	}
	return 0
}
