package collector

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"strings"
	"time"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/policy"
	"github.com/qtop-dev/qtop/tenant"
)

// A peer's answer is input like a report: it is bounded and checked
// before it joins the fleet view, and a bad answer is refused alone (the
// fleet view names that peer as failing, with the reason, and shows the
// others).
//
//   - at most peerMaxBytes of body, read within peerTimeout;
//   - no array longer than peerMaxElems (the peer is asked for maxTop
//     tenants, and every list of a snapshot is shorter), checked on the
//     bytes before anything is decoded, so 600,000 tenants cost a scan,
//     not 600,000 rows;
//   - every number finite, not negative and at most peerMaxValue (so the
//     sum over MaxPeers peers stays finite and the fleet view encodes);
//   - every string made printable UTF-8 (tenant.Clean);
//   - its policy dropped: the fleet view shows this collector's policy
//     only, never one a peer claims.
//
// At most peerDecodes answers are decoded at once, so the memory of a
// fleet view is bounded by MaxPeers × peerMaxBytes of bodies plus
// peerDecodes decoded snapshots (each a small multiple of its body).

const (
	peerMaxBytes = 8 << 20
	peerMaxElems = maxTop + 1
	peerMaxValue = 1e12
	peerMaxCount = 1 << 53
	peerMaxDepth = 32
	peerMaxStr   = 4096
	peerDecodes  = 2
)

// ErrPeerAnswer marks a peer's answer refused for what it holds.
var ErrPeerAnswer = errors.New("peer: answer refused")

// readPeerAnswer reads at most peerMaxBytes of body.
func readPeerAnswer(r io.Reader) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, peerMaxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("peer: %w", err)
	}
	if len(b) > peerMaxBytes {
		return nil, fmt.Errorf("%w: larger than %d bytes", ErrPeerAnswer, peerMaxBytes)
	}
	return b, nil
}

// decodePeerSnapshot checks and decodes one peer's answer.
func decodePeerSnapshot(b []byte) (api.Snapshot, error) {
	if err := scanPeerJSON(b); err != nil {
		return api.Snapshot{}, err
	}
	var snap api.Snapshot
	if err := json.Unmarshal(b, &snap); err != nil {
		return api.Snapshot{}, fmt.Errorf("%w: %w", ErrPeerAnswer, err)
	}
	snap.Policy = policy.Policy{}
	snap.Peers = nil
	if err := checkPeerValue(reflect.ValueOf(&snap).Elem(), "snapshot"); err != nil {
		return api.Snapshot{}, err
	}
	return snap, nil
}

// scanPeerJSON refuses an answer with an array longer than peerMaxElems
// or nested deeper than peerMaxDepth, without keeping what it reads.
func scanPeerJSON(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var counts []int // elements per open array; -1 for an object
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%w: %w", ErrPeerAnswer, err)
		}
		if d, ok := tok.(json.Delim); ok {
			switch d {
			case '[', '{':
				if n := len(counts); n > 0 && counts[n-1] >= 0 {
					counts[n-1]++
				}
				if len(counts) >= peerMaxDepth {
					return fmt.Errorf("%w: nested deeper than %d", ErrPeerAnswer, peerMaxDepth)
				}
				c := 0
				if d == '{' {
					c = -1
				}
				counts = append(counts, c)
			default:
				counts = counts[:len(counts)-1]
			}
		} else if n := len(counts); n > 0 && counts[n-1] >= 0 {
			counts[n-1]++
		}
		if n := len(counts); n > 0 && counts[n-1] > peerMaxElems {
			return fmt.Errorf("%w: a list longer than %d", ErrPeerAnswer, peerMaxElems)
		}
	}
}

var timeType = reflect.TypeFor[time.Time]()

// checkPeerValue walks a decoded snapshot: numbers finite, not negative,
// bounded; strings cleaned in place.
func checkPeerValue(v reflect.Value, path string) error {
	switch v.Kind() {
	case reflect.Float64, reflect.Float32:
		if f := v.Float(); math.IsNaN(f) || f < 0 || f > peerMaxValue {
			return fmt.Errorf("%w: %s = %v (want 0…%g)", ErrPeerAnswer, path, f, peerMaxValue)
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if n := v.Int(); n < 0 || n > peerMaxCount {
			return fmt.Errorf("%w: %s = %d (want 0…%d)", ErrPeerAnswer, path, n, int64(peerMaxCount))
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if n := v.Uint(); n > peerMaxCount {
			return fmt.Errorf("%w: %s = %d (want at most %d)", ErrPeerAnswer, path, n, uint64(peerMaxCount))
		}
	case reflect.String:
		// A statement's line breaks and tabs are spaces, as qtop prints
		// them, not escapes ("\x0a\x09" in every query of a peer's
		// sessions); no name of a row holds one (tenant's checks).
		s := strings.Map(func(r rune) rune {
			if r == '\n' || r == '\t' || r == '\r' {
				return ' '
			}
			return r
		}, v.String())
		if c, changed := tenant.Clean(s, peerMaxStr); changed || c != v.String() {
			v.SetString(c)
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			if err := checkPeerValue(v.Index(i), path); err != nil {
				return err
			}
		}
	case reflect.Map:
		return checkPeerMap(v, path)
	case reflect.Struct:
		if v.Type() == timeType {
			return nil
		}
		for i := range v.NumField() {
			f := v.Type().Field(i)
			if !f.IsExported() {
				continue
			}
			if err := checkPeerValue(v.Field(i), path+"."+f.Name); err != nil {
				return err
			}
		}
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			return checkPeerValue(v.Elem(), path)
		}
	}
	return nil
}

// checkPeerMap checks a map's values and cleans its string keys (a map
// of a snapshot is keyed by strings: wait-event types).
func checkPeerMap(v reflect.Value, path string) error {
	if v.IsNil() {
		return nil
	}
	out := reflect.MakeMapWithSize(v.Type(), v.Len())
	for it := v.MapRange(); it.Next(); {
		k, e := it.Key(), reflect.New(v.Type().Elem()).Elem()
		e.Set(it.Value())
		if err := checkPeerValue(e, path+"["+k.String()+"]"); err != nil {
			return err
		}
		if k.Kind() == reflect.String {
			s, _ := tenant.Clean(k.String(), peerMaxStr)
			k = reflect.ValueOf(s).Convert(v.Type().Key())
		}
		out.SetMapIndex(k, e)
	}
	v.Set(out)
	return nil
}
