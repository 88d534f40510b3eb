package collector

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/qtop-dev/qtop/policy"
)

// BenchmarkSetRule is one rule posted to a policy of n rules: the change
// (validated, saved to the data directory), the answer to the POST (the
// whole policy) and the reply reporters get at the new version.
func BenchmarkSetRule(b *testing.B) {
	for _, n := range []int{100, 3000} {
		b.Run(fmt.Sprint(n, "-rules"), func(b *testing.B) {
			now := t0
			pp := &policyPart{dir: b.TempDir(), log: slog.New(slog.NewTextHandler(io.Discard, nil)),
				changes: prometheus.NewCounter(prometheus.CounterOpts{Name: "c"})}
			if !pp.adopt(bigPolicy(n, now)) {
				b.Fatal("policy not adopted")
			}
			b.ReportAllocs()
			for i := range b.N {
				r := policy.Rule{ID: fmt.Sprint("r", i%n), Tenant: fmt.Sprint("tenant-", i%n), Action: policy.Throttle,
					RUPerSecond: float64(100 + i%7), Expires: now.Add(30 * time.Minute), Reason: "bench"}
				p, err := pp.setRule(context.Background(), now, time.Hour, r, "bench", false)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := pp.encoded(p); err != nil { // the POST's answer
					b.Fatal(err)
				}
				if rep := pp.reply(); rep.Policy == nil {
					b.Fatal("no policy in the reply")
				}
			}
		})
	}
}

// TestPolicyEncodedOncePerVersion: the POST's answer, the reporters'
// reply and the saved file are one encoding of each version, and a
// newer version (a change, an expiry, an adopted fleet policy) is never
// answered with an older one's.
func TestPolicyEncodedOncePerVersion(t *testing.T) {
	now := t0
	dir := t.TempDir()
	pp := &policyPart{dir: dir, log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		changes: prometheus.NewCounter(prometheus.CounterOpts{Name: "c"})}
	r := policy.Rule{ID: "a", Tenant: "acme", Action: policy.Throttle, RUPerSecond: 5, Expires: now.Add(time.Minute), Reason: "t"}
	p, err := pp.setRule(context.Background(), now, time.Hour, r, "t", false)
	if err != nil {
		t.Fatal(err)
	}
	answer, err := pp.encoded(p)
	if err != nil {
		t.Fatal(err)
	}
	if reply := pp.reply().Policy; &reply[0] != &answer[0] {
		t.Fatal("the reply encoded the policy again")
	}
	saved, err := os.ReadFile(filepath.Join(dir, policyFile))
	if err != nil || string(saved) != string(answer)+"\n" {
		t.Fatalf("saved %q (%v), answered %q", saved, err, answer)
	}
	check := func(what string, version uint64, rules int) {
		t.Helper()
		var got policy.Policy
		if err := json.Unmarshal(pp.reply().Policy, &got); err != nil || got.Version != version || len(got.Rules) != rules {
			t.Fatalf("%s: reply at version %d with %d rules (%v), want %d and %d", what, got.Version, len(got.Rules), err, version, rules)
		}
		back := &policyPart{dir: dir, log: pp.log}
		if err := back.load(); err != nil || back.p.Version != version {
			t.Fatalf("%s: file at version %d (%v), want %d", what, back.p.Version, err, version)
		}
	}
	check("set", p.Version, 1)
	if !pp.prune(now.Add(2 * time.Minute)) {
		t.Fatal("expired rule not pruned")
	}
	check("pruned", p.Version+1, 0)
	fleet := bigPolicy(3, now)
	fleet.Version = p.Version + 5
	if !pp.adopt(fleet) {
		t.Fatal("fleet policy not adopted")
	}
	check("adopted", fleet.Version, 4)
	if b, _ := pp.encoded(p); strings.Contains(string(b), "tenant-0") {
		t.Fatal("an old version answered with the current encoding")
	}
}
