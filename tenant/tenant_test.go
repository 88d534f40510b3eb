package tenant

import (
	"context"
	"errors"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/baggage"
)

func TestParseTier(t *testing.T) {
	cases := []struct {
		in   string
		want Tier
		err  bool
	}{
		{"T0", T0, false}, {"t1", T1, false}, {"2", T2, false}, {" T3 ", T3, false},
		{"", TierUnset, false},
		{"T4", TierUnset, true}, {"tier0", TierUnset, true}, {"-1", TierUnset, true}, {"TT", TierUnset, true},
	}
	for _, c := range cases {
		got, err := ParseTier(c.in)
		if (err != nil) != c.err || got != c.want {
			t.Errorf("ParseTier(%q) = %v, %v; want %v, error %v", c.in, got, err, c.want, c.err)
		}
		if err != nil && !errors.Is(err, ErrTier) {
			t.Errorf("ParseTier(%q) error %v is not ErrTier", c.in, err)
		}
	}
}

func TestTierMethods(t *testing.T) {
	for i, tier := range []Tier{T0, T1, T2, T3} {
		if tier.Index() != i || !tier.Valid() {
			t.Errorf("%v: Index %d Valid %v", tier, tier.Index(), tier.Valid())
		}
		back, err := ParseTier(tier.String())
		if err != nil || back != tier {
			t.Errorf("round trip of %v: %v, %v", tier, back, err)
		}
	}
	if TierUnset.Index() != -1 || TierUnset.Valid() || Tier(9).Valid() {
		t.Error("unset and out-of-range tiers must not be valid")
	}
	if TierUnset.Or(T2) != T2 || T1.Or(T2) != T1 {
		t.Error("Or")
	}
	if Tier(9).String() != "Tier(9)" {
		t.Errorf("String of an invalid tier: %q", Tier(9).String())
	}
	if _, err := Tier(9).MarshalText(); err == nil {
		t.Error("MarshalText of an invalid tier must fail")
	}
	var tr Tier
	if err := tr.UnmarshalText([]byte("T3")); err != nil || tr != T3 {
		t.Errorf("UnmarshalText: %v %v", tr, err)
	}
}

func TestValidate(t *testing.T) {
	cases := []struct {
		name string
		tags Tags
		want error
	}{
		{"ok", Tags{Tenant: "acme", Route: "GET /reports", Tier: T2, Key: "sku:42"}, nil},
		{"unicode ok", Tags{Tenant: "zürich-ä"}, nil},
		{"hostile but printable", Tags{Tenant: "*/ DROP TABLE t; --"}, nil},
		{"empty tenant", Tags{}, ErrEmpty},
		{"too long", Tags{Tenant: strings.Repeat("a", MaxTenantLen+1)}, ErrTooLong},
		{"route too long", Tags{Tenant: "a", Route: strings.Repeat("r", MaxRouteLen+1)}, ErrTooLong},
		{"key too long", Tags{Tenant: "a", Key: strings.Repeat("k", MaxKeyLen+1)}, ErrTooLong},
		{"invalid utf8", Tags{Tenant: "ab\xff"}, ErrInvalidUTF8},
		{"newline", Tags{Tenant: "a\nb"}, ErrNotPrintable},
		{"nul", Tags{Tenant: "a\x00b"}, ErrNotPrintable},
		{"nul in route", Tags{Tenant: "a", Route: "x\x00"}, ErrNotPrintable},
		{"bad tier", Tags{Tenant: "a", Tier: 7}, ErrTier},
		{"literal replacement char is fine", Tags{Tenant: "a\uFFFDb"}, nil},
	}
	for _, c := range cases {
		err := c.tags.Validate()
		if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
			t.Errorf("%s: Validate() = %v, want %v", c.name, err, c.want)
		}
	}
}

func TestWithFrom(t *testing.T) {
	ctx := context.Background()
	if _, ok := From(ctx); ok {
		t.Fatal("empty context has tags")
	}
	var nilCtx context.Context // From must tolerate a nil context
	if _, ok := From(nilCtx); ok {
		t.Fatal("nil context has tags")
	}
	want := Tags{Tenant: "acme", Route: "GET /r", Tier: T1, Key: "k"}
	ctx = With(ctx, want)
	got, ok := From(ctx)
	if !ok || got != want {
		t.Fatalf("From = %+v, %v", got, ok)
	}
	inner := With(ctx, Tags{Tenant: "beta"})
	if got, _ := From(inner); got.Tenant != "beta" {
		t.Fatalf("inner tags: %+v", got)
	}
	if got, _ := From(ctx); got != want {
		t.Fatalf("outer tags changed: %+v", got)
	}
}

func TestBaggageRoundTrip(t *testing.T) {
	for _, tn := range []string{"acme", "a b,c;d=e%f", "zürich", "*/ DROP TABLE t; --"} {
		ctx, err := WithBaggage(context.Background(), Tags{Tenant: tn, Tier: T3})
		if err != nil {
			t.Fatalf("%q: %v", tn, err)
		}
		// Through the W3C text form, as a propagator would send it.
		b, err := baggage.Parse(baggage.FromContext(ctx).String())
		if err != nil {
			t.Fatalf("%q: parse %q: %v", tn, baggage.FromContext(ctx).String(), err)
		}
		got, err := FromBaggage(b)
		if err != nil || got.Tenant != tn || got.Tier != T3 {
			t.Fatalf("%q: FromBaggage = %+v, %v", tn, got, err)
		}
		// Lookup prefers the context value, and falls back to baggage.
		bctx := baggage.ContextWithBaggage(context.Background(), b)
		if got, ok := Lookup(bctx); !ok || got.Tenant != tn {
			t.Fatalf("%q: Lookup = %+v, %v", tn, got, ok)
		}
	}
	if _, err := WithBaggage(context.Background(), Tags{Tenant: "a\nb"}); !errors.Is(err, ErrNotPrintable) {
		t.Fatalf("hostile tenant into baggage: %v", err)
	}
}

// A request's own tenant.tier does not pass on beside a tenant read from
// elsewhere without a tier: the next hop would take a tier nobody vouched
// for (a client's T0, never shed). Other members stay.
func TestBaggageDropsUnvouchedTier(t *testing.T) {
	in, err := baggage.Parse("tenant.id=bigcorp,tenant.tier=T0,other=1")
	if err != nil {
		t.Fatal(err)
	}
	b, err := Baggage(in, Tags{Tenant: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	if b.Member(BaggageTenant).Value() != "acme" || b.Member(BaggageTier).Key() != "" || b.Member("other").Value() != "1" {
		t.Errorf("baggage %q", b.String())
	}
	if b, _ = Baggage(in, Tags{Tenant: "acme", Tier: T3}); b.Member(BaggageTier).Value() != "T3" {
		t.Errorf("baggage %q", b.String())
	}
}

func TestFromBaggageErrors(t *testing.T) {
	if _, err := FromBaggage(baggage.Baggage{}); !errors.Is(err, ErrBaggageMissing) {
		t.Errorf("missing: %v", err)
	}
	m, _ := baggage.NewMemberRaw(BaggageTenant, "acme")
	tier, _ := baggage.NewMemberRaw(BaggageTier, "T7")
	b, _ := baggage.New(m, tier)
	if _, err := FromBaggage(b); !errors.Is(err, ErrTier) {
		t.Errorf("bad tier: %v", err)
	}
	bad, _ := baggage.NewMemberRaw(BaggageTenant, strings.Repeat("x", MaxTenantLen+1))
	b, _ = baggage.New(bad)
	if _, err := FromBaggage(b); !errors.Is(err, ErrTooLong) {
		t.Errorf("long tenant: %v", err)
	}
	if _, ok := Lookup(baggage.ContextWithBaggage(context.Background(), b)); ok {
		t.Error("Lookup must ignore invalid baggage")
	}
}

func TestFromDoesNotAllocate(t *testing.T) {
	ctx := With(context.Background(), Tags{Tenant: "acme", Route: "r", Tier: T1})
	if n := testing.AllocsPerRun(100, func() { From(ctx) }); n != 0 {
		t.Fatalf("From allocates %v times", n)
	}
}

func BenchmarkFrom(b *testing.B) {
	ctx := With(context.Background(), Tags{Tenant: "acme", Route: "GET /reports", Tier: T2})
	ctx = context.WithValue(ctx, struct{ x int }{1}, 1) // one unrelated layer, as in real handlers
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := From(ctx); !ok {
			b.Fatal("no tags")
		}
	}
}

func BenchmarkLookupBaggage(b *testing.B) {
	ctx, _ := WithBaggage(context.Background(), Tags{Tenant: "acme", Tier: T2})
	bctx := baggage.ContextWithBaggage(context.Background(), baggage.FromContext(ctx))
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := Lookup(bctx); !ok {
			b.Fatal("no tags")
		}
	}
}

func TestContext(t *testing.T) {
	parent := context.WithValue(context.Background(), testKey{}, "v")
	c := &Context{Context: parent, Tags: Tags{Tenant: "acme", Tier: T1}}
	child, cancel := context.WithCancel(c)
	defer cancel()
	for _, ctx := range []context.Context{c, child} {
		if got, ok := From(ctx); !ok || got.Tenant != "acme" || got.Tier != T1 {
			t.Errorf("From = %+v, %v", got, ok)
		}
		if got, ok := Lookup(ctx); !ok || got.Tenant != "acme" {
			t.Errorf("Lookup = %+v, %v", got, ok)
		}
		if ctx.Value(testKey{}) != "v" {
			t.Error("parent value lost")
		}
	}
	// A With below it wins, as the nearer value does.
	if got, _ := From(With(c, Tags{Tenant: "other"})); got.Tenant != "other" {
		t.Errorf("With over Context: %+v", got)
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = From(child) }); n != 0 {
		t.Errorf("From allocates %v times", n)
	}
}

type testKey struct{}

// TestWithUntaggedName: a tenant named like the untagged load is carried
// as its stand-in, the name the sampler and the OTLP door give it, so a
// recorder does not count it as untagged while the sampler counts its
// sessions under the stand-in (the same load twice).
func TestWithUntaggedName(t *testing.T) {
	stand, _ := Substitute(Untagged)
	if got, _ := From(With(context.Background(), Tags{Tenant: Untagged, Route: "r"})); got.Tenant != stand || got.Route != "r" || stand == Untagged {
		t.Fatalf("carried %+v, want tenant %q", got, stand)
	}
}
