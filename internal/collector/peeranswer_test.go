package collector

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/qtop-dev/qtop/api"
)

// hostilePeer answers /v1/live with body, after checking the peer
// credential (401 without it, as a collector with a read token does).
func hostilePeer(t *testing.T, token string, body func(w http.ResponseWriter, r *http.Request)) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var asked atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		asked.Add(1)
		body(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, &asked
}

func fixed(s string) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte(s)) }
}

// TestHostilePeers: beside a real collector, peers answering a rate
// that sums to +Inf, negative rates, 600,000 or 100,000 tenants, a
// stall and a fake policy are each refused alone: /v1/live stays 200,
// encodes, shows the real tenant's figures exactly, names each failing
// peer with its reason and keeps this collector's policy.
func TestHostilePeers(t *testing.T) {
	const peerTok = "peer-secret"
	many := func(n int) func(http.ResponseWriter, *http.Request) { return fixed(manyTenants(n)) }
	peers := []struct {
		name, want string
		body       func(http.ResponseWriter, *http.Request)
	}{
		{"inf-a", "want 0", fixed(`{"tenants":[{"tenant":"real","req_per_sec":1.7e308}]}`)},
		{"inf-b", "want 0", fixed(`{"tenants":[{"tenant":"real","req_per_sec":1.7e308}]}`)},
		{"negative", "want 0", fixed(`{"tenants":[{"tenant":"real","req_per_sec":-999998}]}`)},
		{"negative-history", "want 0", fixed(`{"tenants":[{"tenant":"real","history":[1,-5]}]}`)},
		{"600k", "larger than|deadline exceeded", many(600_000)},   // cut by size, or by time on a busy machine
		{"100k", "a list longer|deadline exceeded", many(100_000)}, // TestPeerAnswerLongList: by length, without a clock
		{"future", "ahead of", fixed(`{"time":"2999-01-01T00:00:00Z","tenants":[]}`)},
		{"deep", "nested deeper", fixed(strings.Repeat("[", 100) + strings.Repeat("]", 100))},
		{"stall", "peer:", func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }},
		{"fake-policy", "", fixed(`{"policy":{"version":999999999,"rules":[{"id":"evil","tenant":"real","action":"throttle","rate":1}]},` +
			`"tenants":[{"tenant":"peer\u001b[31m","req_per_sec":1}]}`)},
	}
	var urls []string
	var counters []*atomic.Int64
	for _, p := range peers {
		srv, n := hostilePeer(t, peerTok, p.body)
		urls = append(urls, srv.URL)
		counters = append(counters, n)
	}
	f := newFixture(t, func(c *Config) { c.Peers = urls; c.ReadToken = "read"; c.PeerToken = peerTok })
	defer f.stop()
	proc := newProcess(f.clk, "api", "p")
	f.clk.Add(time.Second)
	if st := f.ingest(proc.report(t, "real", 20, "")); st != http.StatusOK {
		t.Fatal(st)
	}
	f.clk.Add(time.Second)
	local := f.s.Snapshot(f.clk.Now(), api.MeasureRU, maxTop)

	req := httptest.NewRequest(http.MethodGet, api.PathLive, nil)
	req.Header.Set("Authorization", "Bearer read")
	rec := httptest.NewRecorder()
	f.s.Handler().ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("/v1/live: %d %s", rec.Code, rec.Body.String())
	}
	var got api.Snapshot
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if got.Policy.Version != local.Policy.Version {
		t.Errorf("policy version %d shown, ours is %d", got.Policy.Version, local.Policy.Version)
	}
	var real *api.TenantRow
	for i, tr := range got.Tenants {
		if tr.Tenant == "real" {
			real = &got.Tenants[i]
		}
		if strings.ContainsRune(tr.Tenant, 0x1b) {
			t.Errorf("escape sequence in tenant %q", tr.Tenant)
		}
	}
	if real == nil || real.ReqPerSec != local.Tenants[0].ReqPerSec || real.ReqPerSec <= 0 {
		t.Fatalf("real tenant %+v, local %+v", real, local.Tenants)
	}
	status := map[string]api.PeerStatus{}
	for _, st := range got.Peers {
		status[st.Collector] = st
	}
	for i, p := range peers {
		st := status[urls[i]]
		if counters[i].Load() == 0 {
			t.Errorf("%s: never asked with the peer token", p.name)
		}
		if p.want == "" {
			if !st.OK {
				t.Errorf("%s: refused: %s", p.name, st.Error)
			}
			continue
		}
		matched := false
		for _, w := range strings.Split(p.want, "|") {
			matched = matched || strings.Contains(st.Error, w)
		}
		if st.OK || !matched {
			t.Errorf("%s: status %+v, want an error with %q", p.name, st, p.want)
		}
	}
}

// TestPeerTokenReads: the peer credential is accepted as a read
// credential, and only as one.
func TestPeerTokenReads(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.ReadToken = "read"; c.PeerToken = "peer" })
	defer f.stop()
	for tok, want := range map[string]int{"peer": 200, "read": 200, "nope": 401} {
		req := httptest.NewRequest(http.MethodGet, api.PathLive+"?scope=local", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		rec := httptest.NewRecorder()
		f.s.Handler().ServeHTTP(rec, req)
		if rec.Code != want {
			t.Errorf("token %q: %d, want %d", tok, rec.Code, want)
		}
	}
	if _, err := f.s.Authorize(httptest.NewRequest(http.MethodPost, "/v1/policy", nil), RoleAdmin); err == nil {
		t.Fatal("no token accepted as admin")
	}
}

// manyTenants is a peer's answer listing n tenants.
func manyTenants(n int) string {
	var b strings.Builder
	b.WriteString(`{"tenants":[`)
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"tenant":"t%d"}`, i)
	}
	b.WriteString(`]}`)
	return b.String()
}

// TestPeerAnswerLongList: an answer listing more tenants than a peer is
// asked for is refused for its length, before it is decoded. (Over the
// network, TestHostilePeers may see it cut by the peer timeout instead
// when the machine is busy.)
func TestPeerAnswerLongList(t *testing.T) {
	b, err := readPeerAnswer(strings.NewReader(manyTenants(100_000)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := decodePeerSnapshot(b); !errors.Is(err, ErrPeerAnswer) || !strings.Contains(err.Error(), "a list longer") {
		t.Fatalf("100,000 tenants: %v", err)
	}
	if _, err := decodePeerSnapshot([]byte(manyTenants(peerMaxElems))); err != nil {
		t.Fatalf("%d tenants: %v", peerMaxElems, err)
	}
}

func TestCheckPeerValue(t *testing.T) {
	for _, bad := range []string{`{"tenants":[{"p95_seconds":1e13}]}`, `{"services":[{"ratio":-1}]}`,
		`{"collector":{"sources":-3}}`, `{"tenants":[{"waits":{"CPU":-1}}]}`} {
		if _, err := decodePeerSnapshot([]byte(bad)); !errors.Is(err, ErrPeerAnswer) {
			t.Errorf("%s: %v", bad, err)
		}
	}
	snap, err := decodePeerSnapshot([]byte(`{"tenants":[{"tenant":"a","waits":{"\u0007x":0.5},"req_per_sec":2}]}`))
	if err != nil || snap.Tenants[0].Waits[`\x07x`] != 0.5 {
		t.Fatalf("%+v %v", snap.Tenants, err)
	}
	// A peer's statements keep their text readable: line breaks and tabs
	// are spaces, as qtop prints them, not escapes.
	snap, err = decodePeerSnapshot([]byte(`{"statements":[{"pid":7,"query":"SELECT 1\n\tFROM t\u001b[2J"}]}`))
	if err != nil || len(snap.Statements) != 1 || snap.Statements[0].Query != `SELECT 1  FROM t\x1b[2J` {
		t.Fatalf("%+v %v", snap.Statements, err)
	}
}
