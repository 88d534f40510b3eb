package report

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/qtop-dev/qtop/histogram"
	"github.com/qtop-dev/qtop/spacesaving"
	"github.com/qtop-dev/qtop/tenant"
)

var t0 = time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)

// sampleReport is a small report with every field set.
func sampleReport() *Report {
	r := &Report{
		Source: Source{Service: "billing-api", Instance: "b7f3", Host: "pod-1"},
		Seq:    42,
		Start:  t0,
		End:    t0.Add(time.Second),
		Rows: []Row{
			{Tenant: "acme", Route: "GET /reports", Tier: tenant.T2, Kind: KindRequest, Count: 3, Errors: 1,
				Duration: 60 * time.Millisecond, RU: 12.5, Bytes: 3000, Rows: 30},
			{Tenant: "acme", Route: "GET /reports", Tier: tenant.T2, Kind: KindDB, Count: 2,
				Duration: 40 * time.Millisecond, RU: 4, Rows: 30},
			{Tenant: OtherTenant, Route: "", Kind: KindJob, Count: 7, Duration: 7 * time.Second},
		},
		Keys:       spacesaving.New(16),
		KeyTenants: map[string]string{"cart:9": "acme", "sku:1": "globex"},
	}
	r.Keys.Add("cart:9", 5)
	r.Keys.Add("sku:1", 2)
	for _, d := range []time.Duration{10, 20, 30} {
		r.Rows[0].Latency.ObserveDuration(d * time.Millisecond)
	}
	r.Rows[1].Latency.ObserveDuration(20 * time.Millisecond)
	r.Rows[1].Latency.ObserveDuration(20 * time.Millisecond)
	for range 7 {
		r.Rows[2].Latency.ObserveDuration(time.Second)
	}
	r.Enforcement.Admitted = [4]uint64{10, 20, 30, 40}
	r.Enforcement.Throttled[3] = 5
	r.Enforcement.Shed[2] = 1
	r.Enforcement.ShadowThrottled[1] = 2
	r.Enforcement.ShadowShed[0] = 3
	r.Enforcement.PriceMultiplier = [4]float64{1, 1, 1.5, 4}
	return r
}

// sameReport compares two reports; histograms are compared bucket by
// bucket (Sum differs after a round trip: it is rebuilt from the buckets,
// and Row.Duration is the exact sum).
func sameReport(t *testing.T, want, got *Report) {
	t.Helper()
	if got.Source != want.Source || got.Seq != want.Seq || !got.Start.Equal(want.Start) || !got.End.Equal(want.End) {
		t.Fatalf("header: got %+v %d [%v %v), want %+v %d [%v %v)", got.Source, got.Seq, got.Start, got.End, want.Source, want.Seq, want.Start, want.End)
	}
	if len(got.Rows) != len(want.Rows) {
		t.Fatalf("got %d rows, want %d", len(got.Rows), len(want.Rows))
	}
	for i := range want.Rows {
		w, g := want.Rows[i], got.Rows[i]
		if bucketsOf(&w.Latency) != bucketsOf(&g.Latency) {
			t.Errorf("row %d latency buckets: got %s, want %s", i, bucketsOf(&g.Latency), bucketsOf(&w.Latency))
		}
		if !w.Latency.Equal(&g.Latency) {
			t.Errorf("row %d: latency differs (%d buckets, want %d)", i, g.Latency.Len(), w.Latency.Len())
		}
		w.Latency, g.Latency = histogram.Sparse{}, histogram.Sparse{}
		if !reflect.DeepEqual(w, g) {
			t.Errorf("row %d: got %+v, want %+v", i, g, w)
		}
	}
	if len(want.KeyTenants) != 0 || len(got.KeyTenants) != 0 {
		if !reflect.DeepEqual(got.KeyTenants, want.KeyTenants) {
			t.Errorf("key tenants: got %v, want %v", got.KeyTenants, want.KeyTenants)
		}
	}
	if (got.Keys == nil) != (want.Keys == nil) {
		t.Fatalf("keys: got %v, want %v", got.Keys, want.Keys)
	}
	if want.Keys != nil {
		if g, w := got.Keys.Top(100), want.Keys.Top(100); !reflect.DeepEqual(g, w) {
			t.Errorf("keys: got %v, want %v", g, w)
		}
	}
	if got.Enforcement != want.Enforcement {
		t.Errorf("enforcement: got %+v, want %+v", got.Enforcement, want.Enforcement)
	}
}

func bucketsOf(h *histogram.Sparse) string {
	var sb strings.Builder
	h.Buckets(func(i int, c uint64) {
		fmt.Fprintf(&sb, "%d:%d ", i, c)
	})
	return sb.String()
}

func TestReportRoundTrip(t *testing.T) {
	want := sampleReport()
	for name, enc := range map[string]func(*Report) ([]byte, error){
		"zstd": (*Report).MarshalBinary,
		"none": (*Report).marshalUncompressed,
	} {
		t.Run(name, func(t *testing.T) {
			b, err := enc(want)
			if err != nil {
				t.Fatal(err)
			}
			got, err := Decode(b)
			if err != nil {
				t.Fatal(err)
			}
			if got.Version != CurrentVersion {
				t.Errorf("version %d, want %d", got.Version, CurrentVersion)
			}
			sameReport(t, want, got)
		})
	}
}

func TestReportEmpty(t *testing.T) {
	want := &Report{Start: t0, End: t0}
	b, err := want.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	sameReport(t, want, got)
	if got.Keys != nil {
		t.Errorf("keys: got a sketch, want nil")
	}
}

func TestReportDeterministic(t *testing.T) {
	sample := sampleReport
	sampleReport := func() *Report {
		r := sample()
		for i := range 20 { // tenants that only key tenants name
			r.KeyTenants[fmt.Sprint("k", i)] = fmt.Sprint("t", i)
		}
		return r
	}
	a, err := sampleReport().MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		b, err := sampleReport().MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Fatal("two encodings of the same report differ")
		}
	}
}

func TestReportNewerVersion(t *testing.T) {
	b, err := sampleReport().MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	binary.BigEndian.PutUint16(b[4:], CurrentVersion+1)
	_, err = Decode(b)
	if !errors.Is(err, ErrVersion) {
		t.Fatalf("got %v, want ErrVersion", err)
	}
	if !strings.Contains(err.Error(), fmt.Sprintf("version %d", CurrentVersion+1)) || !strings.Contains(err.Error(), "upgrade") {
		t.Errorf("message %q does not say which version nor what to do", err)
	}
	binary.BigEndian.PutUint16(b[4:], 0)
	if _, err := Decode(b); !errors.Is(err, ErrVersion) {
		t.Fatalf("version 0: got %v, want ErrVersion", err)
	}
	r := sampleReport()
	r.Version = 7
	if _, err := r.MarshalBinary(); !errors.Is(err, ErrVersion) {
		t.Fatalf("encoding version 7: got %v, want ErrVersion", err)
	}
}

func TestReportMalformed(t *testing.T) {
	good, err := sampleReport().marshalUncompressed()
	if err != nil {
		t.Fatal(err)
	}
	zgood, err := sampleReport().MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	mod := func(b []byte, f func([]byte) []byte) []byte { return f(append([]byte(nil), b...)) }
	cases := map[string]struct {
		body []byte
		want error
	}{
		"empty":          {nil, ErrMalformed},
		"json":           {[]byte(`{"rows":[]}`), ErrMalformed},
		"bad magic":      {mod(good, func(b []byte) []byte { b[0] = 'Q'; return b }), ErrMalformed},
		"reserved":       {mod(good, func(b []byte) []byte { b[7] = 1; return b }), ErrMalformed},
		"codec":          {mod(good, func(b []byte) []byte { b[6] = 9; return b }), ErrMalformed},
		"trailing":       {append(mod(good, func(b []byte) []byte { b[8]++; return b }), 0), ErrMalformed},
		"length lies":    {mod(good, func(b []byte) []byte { b[8]--; return b }), ErrMalformed},
		"zstd garbage":   {mod(zgood, func(b []byte) []byte { return append(b[:10], bytes.Repeat([]byte{0xAB}, 50)...) }), ErrMalformed},
		"zstd truncated": {zgood[:len(zgood)-3], ErrMalformed},
		"huge length":    {append(mod(good[:8], func(b []byte) []byte { return b }), binary.AppendUvarint(nil, MaxDecodedBytes+1)...), ErrTooLarge},
		"oversized body": {make([]byte, MaxReportBytes+1), ErrTooLarge},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			r, err := Decode(c.body)
			if !errors.Is(err, c.want) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
			if r != nil {
				t.Fatal("got a report with the error")
			}
		})
	}
	// Every prefix of a good body is an error, never a panic.
	for i := range len(good) {
		if _, err := Decode(good[:i]); err == nil {
			t.Fatalf("prefix of %d bytes decoded", i)
		}
	}
}

// rawBody wraps a hand-made raw body in an uncompressed header.
func rawBody(raw []byte) []byte {
	b := append([]byte("qtrp"), 0, 1, codecNone, 0)
	b = binary.AppendUvarint(b, uint64(len(raw)))
	return append(b, raw...)
}

// rawPrefix is a raw body up to the string table: empty source, seq 1,
// start t0, a one-second window.
func rawPrefix() []byte {
	b := []byte{0, 0, 0, 1}
	b = binary.AppendVarint(b, t0.UnixNano())
	return binary.AppendUvarint(b, uint64(time.Second))
}

func TestReportForgedCounts(t *testing.T) {
	u := binary.AppendUvarint
	cases := map[string]struct {
		raw  []byte
		want error
	}{
		"strings over limit":  {u(rawPrefix(), MaxStrings+1), ErrTooLarge},
		"strings beyond body": {u(rawPrefix(), 1000), ErrMalformed},
		"rows over limit":     {u(u(rawPrefix(), 0), MaxRows+1), ErrTooLarge},
		"rows beyond body":    {u(u(rawPrefix(), 0), 5), ErrMalformed},
		"long string":         {u(u(rawPrefix(), 1), MaxStringLen+1), ErrTooLarge},
		"window overflows":    {u(binary.AppendVarint([]byte{0, 0, 0, 1}, math.MaxInt64-5), 10), ErrMalformed},
		"varint overlong":     {append(rawPrefix(), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01), ErrMalformed},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := Decode(rawBody(c.raw)); !errors.Is(err, c.want) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
		})
	}
}

// rowBody is a raw body of one row built by f on top of a valid row.
func rowBody(t *testing.T, f func(*Row)) []byte {
	t.Helper()
	r := &Report{Seq: 1, Start: t0, End: t0.Add(time.Second), Rows: []Row{{Tenant: "a", Route: "r", Count: 2, Errors: 1}}}
	r.Rows[0].Latency.Observe(0.01)
	f(&r.Rows[0])
	// Encode with valid values, then patch the raw bytes where the
	// encoder would refuse.
	b, err := r.marshalUncompressed()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestReportBadRows(t *testing.T) {
	good := rowBody(t, func(*Row) {})
	if _, err := Decode(good); err != nil {
		t.Fatal(err)
	}
	// Offsets in the raw body of rowBody: 4 empty-source/seq bytes, the
	// start and window varints, the table (count, "a", "r"), the row count.
	raw := good[9:]
	at := len(rawPrefix()) + 1 + 2 + 2 + 1 // first byte of the row
	patch := func(off int, v byte) []byte {
		c := append([]byte(nil), raw...)
		c[at+off] = v
		return rawBody(c)
	}
	cases := map[string][]byte{
		"tenant index": patch(0, 9),
		"tier":         patch(2, 9),
		"kind":         patch(3, 9),
		"errors":       patch(5, 3), // 3 errors of 2 records
	}
	for name, body := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := Decode(body); !errors.Is(err, ErrMalformed) {
				t.Fatalf("got %v, want ErrMalformed", err)
			}
		})
	}
}

func TestReportMarshalInvalid(t *testing.T) {
	cases := map[string]func(*Report){
		"no start":     func(r *Report) { r.Start = time.Time{} },
		"end first":    func(r *Report) { r.End = r.Start.Add(-1) },
		"tier":         func(r *Report) { r.Rows[0].Tier = 9 },
		"kind":         func(r *Report) { r.Rows[0].Kind = 9 },
		"nan ru":       func(r *Report) { r.Rows[0].RU = math.NaN() },
		"negative ru":  func(r *Report) { r.Rows[0].RU = -1 },
		"errors":       func(r *Report) { r.Rows[0].Errors = 99 },
		"multiplier":   func(r *Report) { r.Enforcement.PriceMultiplier[0] = math.Inf(1) },
		"long tenant":  func(r *Report) { r.Rows[0].Tenant = strings.Repeat("x", MaxStringLen+1) },
		"long service": func(r *Report) { r.Source.Service = strings.Repeat("x", MaxStringLen+1) },
	}
	for name, f := range cases {
		t.Run(name, func(t *testing.T) {
			r := sampleReport()
			f(r)
			_, err := r.MarshalBinary()
			if !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrTooLarge) {
				t.Fatalf("got %v, want ErrInvalid or ErrTooLarge", err)
			}
		})
	}
}

func TestReportUnmarshalReuse(t *testing.T) {
	b, err := sampleReport().MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var r Report
	for range 3 {
		if err := r.UnmarshalBinary(b); err != nil {
			t.Fatal(err)
		}
		sameReport(t, sampleReport(), &r)
	}
	rows := &r.Rows[0]
	small, err := (&Report{Start: t0, End: t0, Rows: []Row{{Tenant: "z", Count: 1}}}).MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if err := r.UnmarshalBinary(small); err != nil {
		t.Fatal(err)
	}
	if &r.Rows[0] != rows {
		t.Error("rows were not reused")
	}
	if r.Rows[0].Latency.Count() != 0 || len(r.Rows) != 1 || r.KeyTenants != nil {
		t.Errorf("stale data after reuse: %+v", r)
	}
	// A failed decode leaves r empty and usable.
	if err := r.UnmarshalBinary(b[:20]); err == nil {
		t.Fatal("truncated body decoded")
	}
	if len(r.Rows) != 0 || r.Seq != 0 || r.Source != (Source{}) {
		t.Errorf("not empty after a failed decode: %+v", r)
	}
	if err := r.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	sameReport(t, sampleReport(), &r)
}

func FuzzDecodeReport(f *testing.F) {
	for _, r := range []*Report{sampleReport(), {Start: t0, End: t0}} {
		b, err := r.MarshalBinary()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		b, err = r.marshalUncompressed()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := Decode(b)
		// A decode into a reused report (of other rows, with latencies)
		// and CheckHeader agree with the decode into a new one.
		reused := sampleReport()
		rerr := reused.UnmarshalBinary(b)
		if (err == nil) != (rerr == nil) {
			t.Fatalf("decode: %v, into a reused report: %v", err, rerr)
		}
		if CheckHeader(b) != nil && err == nil {
			t.Fatalf("CheckHeader refuses what decodes: %v", CheckHeader(b))
		}
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrTooLarge) && !errors.Is(err, ErrVersion) && !errors.Is(err, ErrRange) {
				t.Fatalf("error %v wraps no sentinel", err)
			}
			return
		}
		for i := range r.Rows {
			if !r.Rows[i].Latency.Equal(&reused.Rows[i].Latency) {
				t.Fatalf("row %d: buckets %s into a reused report, %s into a new one", i, bucketsOf(&reused.Rows[i].Latency), bucketsOf(&r.Rows[i].Latency))
			}
		}
		// What decodes re-encodes and decodes to the same report.
		b2, err := r.MarshalBinary()
		if err != nil {
			t.Fatalf("decoded report does not encode: %v", err)
		}
		r2, err := Decode(b2)
		if err != nil {
			t.Fatalf("re-encoded report does not decode: %v", err)
		}
		sameReport(t, r, r2)
	})
}

// TestReportDecompressionBomb: a small zstd body that inflates far beyond
// what its header claims (and beyond MaxDecodedBytes) is refused without
// inflating it.
func TestReportDecompressionBomb(t *testing.T) {
	enc, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	bomb := enc.EncodeAll(make([]byte, 64<<20), nil)
	enc.Close()
	for _, claim := range []uint64{1000, MaxDecodedBytes} {
		b := append([]byte("qtrp"), 0, 1, codecZstd, 0)
		b = binary.AppendUvarint(b, claim)
		b = append(b, bomb...)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := Decode(b)
		runtime.ReadMemStats(&after)
		if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrTooLarge) {
			t.Errorf("claim %d: got %v, want ErrMalformed or ErrTooLarge", claim, err)
		}
		if grew := after.TotalAlloc - before.TotalAlloc; grew > uint64(DecodeBudget(b))+8<<20 {
			t.Errorf("claim %d: decoding allocated %d bytes", claim, grew)
		}
	}
}

// A decompression buffer goes back for reuse once its report is read:
// nothing a decoded report keeps (strings, sketches, sections) may point
// into it, so decoding other reports after it changes nothing in it.
func TestDecodedReportOwnsItsBytes(t *testing.T) {
	mk := func(prefix string) []byte {
		r := &Report{Source: Source{Service: prefix + "-svc", Instance: prefix + "-i", Host: prefix + "-h"},
			Start: time.Unix(1e9, 0), End: time.Unix(1e9+1, 0), Keys: spacesaving.New(16),
			KeyTenants: map[string]string{prefix + "-key": prefix + "-tenant"}}
		r.Keys.Add(prefix+"-key", 3)
		for i := range 20 {
			r.Rows = append(r.Rows, Row{Tenant: fmt.Sprintf("%s-t%d", prefix, i), Route: prefix + "-route", Kind: KindRequest, Count: 1})
		}
		b, err := r.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	first, err := Decode(mk("aaaa"))
	if err != nil {
		t.Fatal(err)
	}
	for range 2 * maxRawKept { // every kept buffer is reused and overwritten
		if _, err := Decode(mk("zzzz")); err != nil {
			t.Fatal(err)
		}
	}
	if first.Source.Service != "aaaa-svc" || first.Source.Host != "aaaa-h" || first.Rows[7].Tenant != "aaaa-t7" ||
		first.Rows[19].Route != "aaaa-route" || first.KeyTenants["aaaa-key"] != "aaaa-tenant" {
		t.Fatalf("a decoded report changed when others were decoded after it: %+v", first.Source)
	}
	if top := first.Keys.Top(1); len(top) != 1 || top[0].Key != "aaaa-key" {
		t.Fatalf("key sketch changed: %v", top)
	}
}
