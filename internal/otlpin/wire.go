package otlpin

import (
	"fmt"
	"math"

	"google.golang.org/protobuf/encoding/protowire"
)

// The wire walk reads an ExportTraceServiceRequest in place: no message
// is materialised, every string is a slice of the body, and only the
// fields the mapping needs are looked at. So memory is the body plus a
// constant, however many spans it holds, and a span costs a few hundred
// nanoseconds.
//
// Field numbers, from opentelemetry/proto/{collector/trace,trace,common,
// resource}/v1 (the same schema go.opentelemetry.io/proto/otlp is
// generated from):
const (
	fReqResourceSpans = 1 // ExportTraceServiceRequest.resource_spans

	fRSResource   = 1 // ResourceSpans.resource
	fRSScopeSpans = 2 // ResourceSpans.scope_spans

	fResAttributes = 1 // Resource.attributes

	fSSSpans = 2 // ScopeSpans.spans

	fSpanTraceID    = 1
	fSpanID         = 2
	fSpanParentID   = 4
	fSpanName       = 5
	fSpanKind       = 6
	fSpanStart      = 7
	fSpanEnd        = 8
	fSpanAttributes = 9
	fSpanStatus     = 15

	fStatusCode = 3

	fKVKey   = 1
	fKVValue = 2

	fAnyString = 1
	fAnyBool   = 2
	fAnyInt    = 3
	fAnyDouble = 4
)

// OTLP span kinds (Span.SpanKind) and status codes (Status.StatusCode).
const (
	kindInternal = 1
	kindServer   = 2
	kindClient   = 3
	kindProducer = 4
	kindConsumer = 5

	statusOK    = 1
	statusError = 2
)

// value is an attribute value as read from the wire: a string (its bytes
// in the body), an integer, a double, or a bool.
type value struct {
	str   []byte
	num   int64
	dbl   float64
	which uint8 // the AnyValue field number; 0: absent or another type
}

func (v value) int() (int64, bool) {
	switch v.which {
	case fAnyInt:
		return v.num, true
	case fAnyDouble:
		if v.dbl >= math.MinInt64 && v.dbl <= math.MaxInt64 {
			return int64(v.dbl), true
		}
	}
	return 0, false
}

func (v value) float() (float64, bool) {
	switch v.which {
	case fAnyDouble:
		return v.dbl, true
	case fAnyInt:
		return float64(v.num), true
	}
	return 0, false
}

// field reads one field header and value from b. For LEN fields v is the
// payload; for varints and fixed fields n holds the number.
func field(b []byte) (num protowire.Number, typ protowire.Type, v []byte, n uint64, rest []byte, err error) {
	num, typ, l := protowire.ConsumeTag(b)
	if l < 0 {
		return 0, 0, nil, 0, nil, wireErr(l)
	}
	b = b[l:]
	switch typ {
	case protowire.BytesType:
		v, l = protowire.ConsumeBytes(b)
	case protowire.VarintType:
		n, l = protowire.ConsumeVarint(b)
	case protowire.Fixed64Type:
		n, l = protowire.ConsumeFixed64(b)
	case protowire.Fixed32Type:
		var n32 uint32
		n32, l = protowire.ConsumeFixed32(b)
		n = uint64(n32)
	default:
		l = protowire.ConsumeFieldValue(num, typ, b)
	}
	if l < 0 {
		return 0, 0, nil, 0, nil, wireErr(l)
	}
	return num, typ, v, n, b[l:], nil
}

func wireErr(code int) error {
	return fmt.Errorf("%w: %v", ErrMalformed, protowire.ParseError(code))
}

// eachLen calls fn with the payload of every LEN field numbered want in
// message b, and checks the whole message is well formed.
func eachLen(b []byte, want protowire.Number, fn func([]byte) error) error {
	for len(b) > 0 {
		num, typ, v, _, rest, err := field(b)
		if err != nil {
			return err
		}
		if num == want {
			if typ != protowire.BytesType {
				return fmt.Errorf("%w: field %d has wire type %d", ErrMalformed, num, typ)
			}
			if err := fn(v); err != nil {
				return err
			}
		}
		b = rest
	}
	return nil
}

// keyValue reads a KeyValue: its key and, for scalar values, the value.
func keyValue(b []byte) (key []byte, val value, err error) {
	key, raw, err := keyRaw(b)
	if err != nil || raw == nil {
		return key, value{}, err
	}
	val, err = anyValue(raw)
	return key, val, err
}

// keyRaw reads a KeyValue's key and leaves its AnyValue undecoded (read
// it with anyValue when the key is one the mapping uses): most attributes
// of a span are not, and their values are only framed, never read.
func keyRaw(b []byte) (key, raw []byte, err error) {
	for len(b) > 0 {
		num, typ, v, _, rest, err := field(b)
		if err != nil {
			return nil, nil, err
		}
		switch {
		case num == fKVKey && typ == protowire.BytesType:
			key = v
		case num == fKVValue && typ == protowire.BytesType:
			raw = v
		}
		b = rest
	}
	return key, raw, nil
}

func anyValue(b []byte) (value, error) {
	var val value
	for len(b) > 0 {
		num, typ, v, n, rest, err := field(b)
		if err != nil {
			return value{}, err
		}
		switch {
		case num == fAnyString && typ == protowire.BytesType:
			val = value{str: v, which: fAnyString}
		case num == fAnyBool && typ == protowire.VarintType:
			val = value{num: int64(n), which: fAnyBool}
		case num == fAnyInt && typ == protowire.VarintType:
			val = value{num: int64(n), which: fAnyInt}
		case num == fAnyDouble && typ == protowire.Fixed64Type:
			val = value{dbl: math.Float64frombits(n), which: fAnyDouble}
		default:
			val = value{} // arrays, maps, bytes: not read
		}
		b = rest
	}
	return val, nil
}

// rawSpan is one span as read from the wire; its slices point into the
// body and live as long as it.
type rawSpan struct {
	traceID, spanID, parentID, name []byte
	kind                            uint64
	start, end                      uint64
	status                          uint64
}

// readSpan reads the fields of a Span the mapping uses; attributes are
// kept as a list of KeyValue payloads (attrs) to be walked once by the
// mapper.
func readSpan(b []byte, sp *rawSpan, attrs *[][]byte) error {
	*sp = rawSpan{}
	*attrs = (*attrs)[:0]
	for len(b) > 0 {
		num, typ, v, n, rest, err := field(b)
		if err != nil {
			return err
		}
		switch num {
		case fSpanTraceID:
			sp.traceID = v
		case fSpanID:
			sp.spanID = v
		case fSpanParentID:
			sp.parentID = v
		case fSpanName:
			sp.name = v
		case fSpanKind:
			if typ == protowire.VarintType {
				sp.kind = n
			}
		case fSpanStart:
			if typ == protowire.Fixed64Type {
				sp.start = n
			}
		case fSpanEnd:
			if typ == protowire.Fixed64Type {
				sp.end = n
			}
		case fSpanAttributes:
			if typ == protowire.BytesType {
				*attrs = append(*attrs, v)
			}
		case fSpanStatus:
			if typ == protowire.BytesType {
				if err := eachVarint(v, fStatusCode, func(c uint64) { sp.status = c }); err != nil {
					return err
				}
			}
		}
		b = rest
	}
	return nil
}

func eachVarint(b []byte, want protowire.Number, fn func(uint64)) error {
	for len(b) > 0 {
		num, typ, _, n, rest, err := field(b)
		if err != nil {
			return err
		}
		if num == want && typ == protowire.VarintType {
			fn(n)
		}
		b = rest
	}
	return nil
}
