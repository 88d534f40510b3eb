package report

import "strings"

// SourceKind says what kind of process sent a report, so that the
// collector knows which of them can apply a policy: an agent (qtop's
// reporter inside a service, which enforces rules and budgets), an OTLP
// service (its spans turned into reports by the collector's OTLP
// receiver, which applies nothing), or a gate (cmd/gate, which enforces
// in front of a service).
type SourceKind uint8

// The kinds.
const (
	SourceAgent SourceKind = iota
	SourceOTLP
	SourceGate
)

// Instance suffixes that mark a source's kind; a process of qtop's own
// reporter uses none. The suffix travels in Source.Instance, so it needs
// no change of the wire format.
const (
	OTLPInstanceMark = "~otlp-"
	GateInstanceMark = "~gate-"
)

// Kind returns the kind of process s is, by its instance's mark.
func (s Source) Kind() SourceKind {
	switch {
	case strings.Contains(s.Instance, OTLPInstanceMark):
		return SourceOTLP
	case strings.Contains(s.Instance, GateInstanceMark):
		return SourceGate
	}
	return SourceAgent
}

// String returns "agent", "otlp" or "gate".
func (k SourceKind) String() string {
	switch k {
	case SourceOTLP:
		return "otlp"
	case SourceGate:
		return "gate"
	}
	return "agent"
}
