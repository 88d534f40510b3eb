package meter

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestEnforcementDetailRoundTrip(t *testing.T) {
	rep := Report{Source: Source{Service: "api", Instance: "i", Host: "h"}, Seq: 1, Start: t0, End: t0.Add(time.Second)}
	// Without drops or pool waits the section is absent: the report ends
	// with the single 0 byte of "no sections".
	b, err := rep.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := back.UnmarshalBinary(b); err != nil || back.PoolWait != nil {
		t.Fatalf("%v %+v", err, back.Enforcement)
	}
	rep.Enforcement.Shed[3] = 4
	rep.Enforcement.Dropped = [4]uint64{0, 1, 2, 3}
	rep.Enforcement.ShadowDropped[2] = 9
	rep.PoolWait = []PoolWait{{Tenant: "acme", Count: 3, Wait: 40 * time.Millisecond, Max: 30 * time.Millisecond}, {Tenant: "globex", Count: 1, Wait: time.Microsecond, Max: time.Microsecond}}
	if b, err = rep.MarshalBinary(); err != nil {
		t.Fatal(err)
	}
	if err := back.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	if back.Enforcement != rep.Enforcement || !reflect.DeepEqual(back.PoolWait, rep.PoolWait) {
		t.Errorf("decoded %+v %+v\nwant    %+v %+v", back.Enforcement, back.PoolWait, rep.Enforcement, rep.PoolWait)
	}
}

func TestEnforcementDetailBounds(t *testing.T) {
	rep := Report{Source: Source{Service: "api", Instance: "i"}, Seq: 1, Start: t0, End: t0.Add(time.Second)}
	rep.PoolWait = make([]PoolWait, MaxPoolWaits+1)
	if _, err := rep.MarshalBinary(); !errors.Is(err, ErrTooLarge) {
		t.Errorf("too many pool waits: %v", err)
	}
	rep.PoolWait = []PoolWait{{Tenant: strings.Repeat("x", MaxStringLen+1)}}
	if _, err := rep.MarshalBinary(); !errors.Is(err, ErrTooLarge) {
		t.Errorf("long tenant: %v", err)
	}
	rep.PoolWait = []PoolWait{{Tenant: "a", Wait: -1}}
	if _, err := rep.MarshalBinary(); !errors.Is(err, ErrInvalid) {
		t.Errorf("negative wait: %v", err)
	}
	// A forged count larger than the payload is refused without allocating it.
	var d decoder
	d.b = []byte{0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0x07}
	var r Report
	decodeEnforcementDetail(&d, &r)
	if d.err == nil {
		t.Error("forged pool-wait count accepted")
	}
}
