package enforcesim

import (
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/qtop-dev/qtop/policy"
)

func TestFreshnessCalibration(t *testing.T) {
	res, err := Freshness(DefaultFreshness())
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	WriteFreshness(&b, res)
	t.Log("\n" + b.String())
	r0 := res.Rows[0]
	if math.Abs(r0.Share-0.20) > 0.005 || math.Abs(r0.Precision-0.80) > 0.01 {
		t.Errorf("first row %.3f / %.3f, want 0.20 / 0.80 (calibrated)", r0.Share, r0.Precision)
	}
	all := res.Rows[len(res.Rows)-1]
	sum := 0.0
	for _, r := range res.Rows[:len(res.Rows)-1] {
		sum += r.Share
	}
	if math.Abs(all.Share-sum) > 1e-9 {
		t.Errorf("all rules share %.4f, the rules' sum %.4f", all.Share, sum)
	}
	// The variant with changes made early in one session in ten.
	c := DefaultFreshness()
	c.SessionChanges = 0.1
	variant, err := Freshness(c)
	if err != nil {
		t.Fatal(err)
	}
	WriteFreshness(&b, variant)
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(b.String(), "\n") {
		if line != "" && !strings.Contains(string(doc), "//\t"+line) {
			t.Errorf("doc.go lacks or has a stale line:\n%s", line)
		}
	}
}

func TestFreshnessTrace(t *testing.T) {
	c := DefaultFreshness()
	c.Users, c.Days, c.PushesPerDay, c.ChangesPerDay = 40, 3, 7, 3
	tr := c.Trace(10, 36*time.Hour)
	if len(tr.Requests) == 0 || len(tr.Changes) != 10 {
		t.Fatalf("%d requests, %d users", len(tr.Requests), len(tr.Changes))
	}
	causes := map[policy.Cause]int{}
	for i, q := range tr.Requests {
		if q.User >= 10 || q.At >= 36*time.Hour || (i > 0 && q.At < tr.Requests[i-1].At) {
			t.Fatalf("request %d: %+v", i, q)
		}
		causes[q.Cause]++
	}
	if len(causes) != 4 {
		t.Errorf("causes %v", causes)
	}
	for _, cs := range tr.Changes {
		for _, x := range cs {
			if x >= 36*time.Hour {
				t.Fatalf("change at %v", x)
			}
		}
	}
	if v := tr.Version(0, 36*time.Hour); v != len(tr.Changes[0]) {
		t.Errorf("version %d of %d changes", v, len(tr.Changes[0]))
	}
}

// TestFreshnessSessionChanges: data changed early in a session lowers the
// early reload's precision and leaves the calibrated first row alone.
func TestFreshnessSessionChanges(t *testing.T) {
	c := DefaultFreshness()
	c.Users, c.Days = 300, 6
	base, err := Freshness(c)
	if err != nil {
		t.Fatal(err)
	}
	c.SessionChanges = 0.2
	with, err := Freshness(c)
	if err != nil {
		t.Fatal(err)
	}
	if r := with.Rows[2]; r.Precision > base.Rows[2].Precision-0.05 {
		t.Errorf("reload precision %.3f with session changes, %.3f without", r.Precision, base.Rows[2].Precision)
	}
	if math.Abs(with.Rows[0].Share-base.Rows[0].Share) > 0.01 {
		t.Errorf("push share moved: %.3f → %.3f", base.Rows[0].Share, with.Rows[0].Share)
	}
}
