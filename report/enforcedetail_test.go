package report

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestEnforcementDetailRoundTrip(t *testing.T) {
	rep := Report{Source: Source{Service: "api", Instance: "i", Host: "h"}, Seq: 1, Start: t0, End: t0.Add(time.Second)}
	// Without the section the report ends with the single 0 byte of "no
	// sections".
	b, err := rep.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := back.UnmarshalBinary(b); err != nil || back.Sections != nil {
		t.Fatalf("%v %+v", err, back.Sections)
	}
	rep.Enforcement.Shed[3] = 4
	detail := EnforcementDetail{Dropped: [4]uint64{0, 1, 2, 3}, ShadowDropped: [4]uint64{0, 0, 9, 0},
		PoolWait: []PoolWait{{Tenant: "acme", Count: 3, Wait: 40 * time.Millisecond, Max: 30 * time.Millisecond}, {Tenant: "globex", Count: 1, Wait: time.Microsecond, Max: time.Microsecond}}}
	rep.SetSection(detail)
	if b, err = rep.MarshalBinary(); err != nil {
		t.Fatal(err)
	}
	if err := back.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	got, ok := SectionOf[EnforcementDetail](&back)
	if back.Enforcement != rep.Enforcement || !ok || !reflect.DeepEqual(got, detail) {
		t.Errorf("decoded %+v %+v\nwant    %+v %+v", back.Enforcement, got, rep.Enforcement, detail)
	}
}

func TestEnforcementDetailBounds(t *testing.T) {
	rep := Report{Source: Source{Service: "api", Instance: "i"}, Seq: 1, Start: t0, End: t0.Add(time.Second)}
	rep.SetSection(EnforcementDetail{PoolWait: make([]PoolWait, MaxPoolWaits+1)})
	if _, err := rep.MarshalBinary(); !errors.Is(err, ErrTooLarge) {
		t.Errorf("too many pool waits: %v", err)
	}
	rep.SetSection(EnforcementDetail{PoolWait: []PoolWait{{Tenant: strings.Repeat("x", MaxStringLen+1)}}})
	if _, err := rep.MarshalBinary(); !errors.Is(err, ErrTooLarge) {
		t.Errorf("long tenant: %v", err)
	}
	rep.SetSection(EnforcementDetail{PoolWait: []PoolWait{{Tenant: "a", Wait: -1}}})
	if _, err := rep.MarshalBinary(); !errors.Is(err, ErrInvalid) {
		t.Errorf("negative wait: %v", err)
	}
	// A forged count larger than the payload is refused without allocating it.
	d := Reader{b: []byte{0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0x07}}
	if s := (EnforcementDetail{}).DecodeSection(&d); d.Err() == nil || s != nil {
		t.Error("forged pool-wait count accepted")
	}
}
