package store

import (
	"bytes"
	"encoding/binary"
	"encoding/gob"
	"fmt"
	"hash/crc32"
	"time"

	"github.com/qtop-dev/qtop/tenant"
)

// A spool file is one batch: a fixed header, then the rows as gob.
//
//	magic "QSPL" | format 1 | kind | rows uint32 | payload length uint32 | CRC-32C of payload | payload
//
// Latency histograms are stored sparse (index, count), as ratio.Sparse
// holds them.
const (
	spoolMagic   = "QSPL"
	spoolFormat  = 1
	headerLen    = 4 + 1 + 1 + 4 + 4 + 4
	maxSpoolRows = 1 << 24
)

type batchKind uint8

const (
	kindRollups batchKind = iota + 1
	kindHotKeys
	kindStatements
	kindAudit
)

func (k batchKind) String() string {
	switch k {
	case kindRollups:
		return "rollups"
	case kindHotKeys:
		return "hot keys"
	case kindStatements:
		return "statements"
	case kindAudit:
		return "audit"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// batch is one decoded spool file: exactly one of the slices is set.
type batch struct {
	kind       batchKind
	rollups    []Rollup
	hotKeys    []HotKey
	statements []Statement
	audit      []Audit
}

func (b *batch) rows() int {
	return len(b.rollups) + len(b.hotKeys) + len(b.statements) + len(b.audit)
}

// spoolRollup is a Rollup with its latency as (index, count) pairs. Gob
// matches fields by name, so files written when Rollup.Latency was a
// dense []uint64 (never set in R, HasLat telling a histogram without
// observations from none) read the same.
type spoolRollup struct {
	R      spoolRow
	HasLat bool // a histogram with buckets (or, in old files, without)
	LatIdx []uint16
	LatCnt []uint64
}

// spoolRow is a Rollup without its latency, field for field (gob needs
// exported fields all the way down; ratio.Sparse has none).
type spoolRow struct {
	Minute                 time.Time
	Writer                 string
	Version                uint64
	Service, Tenant, Route string
	Tier                   tenant.Tier
	Kind                   string
	Count, Errors          uint64
	DurationSeconds, RU    float64
	Bytes, Rows            uint64
	ActiveSessionSeconds   float64
	// Latency was the dense histogram, never written in R: a file that
	// has it is corrupt.
	Latency []uint64
}

func toSpool(r *Rollup) spoolRollup {
	s := spoolRollup{R: spoolRow{
		Minute: r.Minute, Writer: r.Writer, Version: r.Version, Service: r.Service, Tenant: r.Tenant, Route: r.Route,
		Tier: r.Tier, Kind: r.Kind, Count: r.Count, Errors: r.Errors, DurationSeconds: r.DurationSeconds, RU: r.RU,
		Bytes: r.Bytes, Rows: r.Rows, ActiveSessionSeconds: r.ActiveSessionSeconds,
	}}
	if r.Latency.Len() > 0 {
		s.HasLat = true
		s.LatIdx, s.LatCnt = r.Latency.AppendPairs(nil, nil)
	}
	return s
}

func (s *spoolRollup) rollup() (Rollup, error) {
	r := Rollup{
		Minute: s.R.Minute, Writer: s.R.Writer, Version: s.R.Version, Service: s.R.Service, Tenant: s.R.Tenant, Route: s.R.Route,
		Tier: s.R.Tier, Kind: s.R.Kind, Count: s.R.Count, Errors: s.R.Errors, DurationSeconds: s.R.DurationSeconds, RU: s.R.RU,
		Bytes: s.R.Bytes, Rows: s.R.Rows, ActiveSessionSeconds: s.R.ActiveSessionSeconds,
	}
	switch {
	case s.R.Latency != nil:
		return r, fmt.Errorf("latency stored dense")
	case !s.HasLat && len(s.LatIdx)+len(s.LatCnt) > 0:
		return r, fmt.Errorf("latency buckets without a histogram")
	}
	if err := r.Latency.SetPairs(s.LatIdx, s.LatCnt); err != nil {
		return r, fmt.Errorf("latency: %w", err)
	}
	return r, nil
}

func encodeBatch(b *batch) ([]byte, error) {
	var payload bytes.Buffer
	enc := gob.NewEncoder(&payload)
	var err error
	switch b.kind {
	case kindRollups:
		rs := make([]spoolRollup, len(b.rollups))
		for i := range b.rollups {
			rs[i] = toSpool(&b.rollups[i])
		}
		err = enc.Encode(rs)
	case kindHotKeys:
		err = enc.Encode(b.hotKeys)
	case kindStatements:
		err = enc.Encode(b.statements)
	case kindAudit:
		err = enc.Encode(b.audit)
	default:
		return nil, fmt.Errorf("store: spool: unknown batch kind %d", b.kind)
	}
	if err != nil {
		return nil, fmt.Errorf("store: spool: encode %s: %w", b.kind, err)
	}
	out := make([]byte, headerLen, headerLen+payload.Len())
	copy(out, spoolMagic)
	out[4] = spoolFormat
	out[5] = byte(b.kind)
	binary.LittleEndian.PutUint32(out[6:], uint32(b.rows()))
	binary.LittleEndian.PutUint32(out[10:], uint32(payload.Len()))
	binary.LittleEndian.PutUint32(out[14:], crc32.Checksum(payload.Bytes(), castagnoli))
	return append(out, payload.Bytes()...), nil
}

// header is what a spool file says about itself before its payload is read.
type header struct {
	kind       batchKind
	rows       int
	payloadLen int
	crc        uint32
}

func decodeHeader(data []byte) (header, error) {
	if len(data) < headerLen {
		return header{}, fmt.Errorf("%w: %d bytes, shorter than the %d-byte header", ErrSpoolCorrupt, len(data), headerLen)
	}
	if string(data[:4]) != spoolMagic {
		return header{}, fmt.Errorf("%w: bad magic %q", ErrSpoolCorrupt, data[:4])
	}
	if data[4] != spoolFormat {
		return header{}, fmt.Errorf("%w: unknown format %d", ErrSpoolCorrupt, data[4])
	}
	h := header{
		kind:       batchKind(data[5]),
		rows:       int(binary.LittleEndian.Uint32(data[6:])),
		payloadLen: int(binary.LittleEndian.Uint32(data[10:])),
		crc:        binary.LittleEndian.Uint32(data[14:]),
	}
	if h.kind < kindRollups || h.kind > kindAudit {
		return header{}, fmt.Errorf("%w: unknown batch kind %d", ErrSpoolCorrupt, data[5])
	}
	if h.rows > maxSpoolRows {
		return header{}, fmt.Errorf("%w: %d rows", ErrSpoolCorrupt, h.rows)
	}
	return h, nil
}

// decodeBatch reads a whole spool file. Any damage (truncation, a flipped
// bit, rows that do not validate) is an ErrSpoolCorrupt.
func decodeBatch(data []byte) (*batch, error) {
	h, err := decodeHeader(data)
	if err != nil {
		return nil, err
	}
	payload := data[headerLen:]
	if len(payload) != h.payloadLen {
		return nil, fmt.Errorf("%w: payload is %d bytes, header says %d", ErrSpoolCorrupt, len(payload), h.payloadLen)
	}
	if got := crc32.Checksum(payload, castagnoli); got != h.crc {
		return nil, fmt.Errorf("%w: checksum %08x, header says %08x", ErrSpoolCorrupt, got, h.crc)
	}
	b := &batch{kind: h.kind}
	dec := gob.NewDecoder(bytes.NewReader(payload))
	switch h.kind {
	case kindRollups:
		var rs []spoolRollup
		if err = dec.Decode(&rs); err == nil {
			b.rollups = make([]Rollup, len(rs))
			for i := range rs {
				if b.rollups[i], err = rs[i].rollup(); err != nil {
					err = fmt.Errorf("rollup %d: %w", i, err)
					break
				}
			}
			if err == nil {
				err = ValidateRollups(b.rollups)
			}
		}
	case kindHotKeys:
		if err = dec.Decode(&b.hotKeys); err == nil {
			err = ValidateHotKeys(b.hotKeys)
		}
	case kindStatements:
		if err = dec.Decode(&b.statements); err == nil {
			err = ValidateStatements(b.statements)
		}
	case kindAudit:
		if err = dec.Decode(&b.audit); err == nil {
			err = ValidateAudit(b.audit)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrSpoolCorrupt, h.kind, err)
	}
	if b.rows() != h.rows {
		return nil, fmt.Errorf("%w: %d rows, header says %d", ErrSpoolCorrupt, b.rows(), h.rows)
	}
	return b, nil
}
