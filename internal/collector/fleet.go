package collector

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/store"
)

// Several collectors, one fleet.
//
// Each collector receives the reports of its part of the fleet (the
// Reporter picks one per process) and writes them to the shared store. For
// the live view, a collector with Config.Peers asks every peer for its own
// snapshot (GET /v1/live?scope=local, up to 1000 tenants) when it is asked
// for one, and merges them with live.Merge: qtop pointed at any collector
// sees the whole fleet, no later than the slowest peer's answer. Requests
// carry the peer credential (Config.PeerToken, by default the read
// token), which every collector accepts as a read credential. A peer's
// answer is bounded and checked like a report (peeranswer.go). Nothing is
// replicated between collectors: a peer that does not answer in time is
// left out of that snapshot and named in Snapshot.Peers.
//
// With Config.SharedPolicy the policy lives in the store (fleet_policy.go).

// MaxPeers bounds Config.Peers.
const MaxPeers = 64

// peerTimeout bounds one peer's answer to a fleet snapshot.
const peerTimeout = 800 * time.Millisecond

type fleet struct {
	peers     []string // base URLs, http://host:port
	client    *http.Client
	transport *http.Transport // the client's, whose idle connections Run's end closes
	next      store.Store     // the store under the spool, for the shared policy
	shared    bool            // Config.SharedPolicy
	pol       *policyPart
	log       *slog.Logger
	now       func() time.Time
	token     func() string // the peer credential sent to peers (the peer token in force, else the read token)
	decodes   chan struct{} // peerDecodes slots
	polled    atomic.Bool   // the shared policy was read once (readyz)
	// self is this process's instance, sent with its own view
	// (instanceHeader): a peer that answers with it is this collector,
	// whose address is in its own peer list (one list for every replica,
	// as a StatefulSet's pods share it), not merged twice. isSelf marks
	// those peers once seen.
	self   string
	isSelf []atomic.Bool

	mu    sync.Mutex
	cache map[snapKey]*api.Snapshot
}

// checkPeers turns Config.Peers into base URLs.
func checkPeers(peers []string) ([]string, error) {
	if len(peers) > MaxPeers {
		return nil, fmt.Errorf("%w: %d peers (at most %d)", ErrConfig, len(peers), MaxPeers)
	}
	var out []string
	for _, p := range peers {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		if !strings.Contains(p, "://") {
			p = "http://" + p
		}
		u, err := url.Parse(p)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
			return nil, fmt.Errorf("%w: peer %q: want host:port or http(s)://host:port", ErrConfig, p)
		}
		out = append(out, strings.TrimSuffix(p, "/"))
	}
	return out, nil
}

// newFleet sets up the peers and the shared policy from the config; next
// is the store under the spool (nil without a store). It returns nil
// when the collector is alone.
func newFleet(cfg Config, next store.Store, pol *policyPart, token func() string) (*fleet, error) {
	peers, err := checkPeers(cfg.Peers)
	if err != nil {
		return nil, err
	}
	if len(peers) == 0 && !cfg.SharedPolicy {
		return nil, nil
	}
	if cfg.SharedPolicy {
		u, _ := store.ParseURL(cfg.Store)
		if u.Scheme != store.SchemeClickHouse {
			return nil, fmt.Errorf("%w: a shared policy needs a ClickHouse store that every collector writes to", ErrConfig)
		}
	}
	tr, err := cfg.PeerTLS.Transport()
	if err != nil {
		return nil, fmt.Errorf("%w: peers: %w", ErrConfig, err)
	}
	return &fleet{peers: peers, next: next, transport: tr, client: &http.Client{Timeout: peerTimeout, Transport: tr},
		cache: make(map[snapKey]*api.Snapshot), shared: cfg.SharedPolicy, pol: pol, log: cfg.Logger, now: cfg.Now,
		token: token, decodes: make(chan struct{}, peerDecodes), self: rand.Text(), isSelf: make([]atomic.Bool, len(peers))}, nil
}

// instanceHeader carries a collector's instance (fleet.self) with its
// own view.
const instanceHeader = "Qtop-Collector-Instance"

// errSelf: the peer asked is this collector.
var errSelf = errors.New("peer: this collector itself")

// withFleet serves the fleet's live view on /v1/live and /v1/live/stream
// when the collector has peers (scope=local: this collector's own).
func (s httpAPI) withFleet(h http.Handler) http.Handler {
	if s.fleet == nil || len(s.fleet.peers) == 0 {
		return h
	}
	mux := http.NewServeMux()
	mux.Handle("/", h)
	// The fleet's views take the read credential, as the collector's own
	// do (h's routes are authorized where they are made).
	mux.HandleFunc(api.PathLive, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("scope") == api.ScopeLocal {
			w.Header().Set(instanceHeader, s.fleet.self)
			h.ServeHTTP(w, r)
			return
		}
		s.authorized(RoleRead, func(w http.ResponseWriter, r *http.Request) {
			s.serveLive(w, r, func(measure string, n int) any { return s.fleetSnapshot(r.Context(), measure, n) })
		})(w, r)
	})
	mux.HandleFunc(api.PathStream, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("scope") == api.ScopeLocal {
			h.ServeHTTP(w, r)
			return
		}
		s.authorized(RoleRead, func(w http.ResponseWriter, r *http.Request) {
			if readOnly(w, r) {
				s.fleetStream(w, r)
			}
		})(w, r)
	})
	return mux
}

// fleetSnapshot is Snapshot merged with every peer's own snapshot (see
// live.Merge); without peers it is Snapshot. Peers are asked at most once
// a second per measure and n.
func (s httpAPI) fleetSnapshot(ctx context.Context, measure string, n int) api.Snapshot {
	now := s.cfg.Now()
	if s.fleet == nil || len(s.fleet.peers) == 0 {
		return s.Snapshot(now, measure, n)
	}
	f := s.fleet
	key := snapKey{now.Unix(), measure, n}
	f.mu.Lock()
	if c := f.cache[key]; c != nil {
		f.mu.Unlock()
		return *c
	}
	f.mu.Unlock()
	snaps := make([]api.Snapshot, 1+len(f.peers))
	status := make([]api.PeerStatus, 1+len(f.peers))
	snaps[0] = s.Snapshot(now, measure, maxTop)
	status[0] = api.PeerStatus{Collector: "self", OK: true, Time: snaps[0].Time}
	var wg sync.WaitGroup
	for i, p := range f.peers {
		if f.isSelf[i].Load() {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			snap, err := f.get(ctx, p, measure)
			if errors.Is(err, errSelf) {
				f.isSelf[i].Store(true)
				return
			}
			status[i+1] = api.PeerStatus{Collector: p, OK: err == nil, Time: snap.Time}
			if err != nil {
				status[i+1].Error = err.Error()
				return
			}
			snaps[i+1] = snap
		}()
	}
	wg.Wait()
	var got []api.Snapshot
	peers := append(make([]api.PeerStatus, 0, len(status)), status[0])
	for i, st := range status {
		if i > 0 && f.isSelf[i-1].Load() {
			// Listed once: "self" is named by its address among the peers.
			peers[0].Collector = f.peers[i-1] + " (self)"
			continue
		}
		if i > 0 {
			peers = append(peers, st)
		}
		if st.OK {
			got = append(got, snaps[i])
		}
	}
	out := api.Merge(got, measure, n)
	out.Policy = snaps[0].Policy // never a peer's
	out.Collector.Uptime = snaps[0].Collector.Uptime
	out.Collector.Store = snaps[0].Collector.Store
	out.Peers = peers
	f.mu.Lock()
	if len(f.cache) > 64 {
		clear(f.cache)
	}
	f.cache[key] = &out
	f.mu.Unlock()
	return out
}

// get asks one peer for its own snapshot.
func (f *fleet) get(ctx context.Context, peer, measure string) (api.Snapshot, error) {
	ctx, cancel := context.WithTimeout(ctx, peerTimeout)
	defer cancel()
	q := url.Values{"scope": {api.ScopeLocal}, "by": {measure}, "n": {strconv.Itoa(maxTop)}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, peer+api.PathLive+"?"+q.Encode(), nil)
	if err != nil {
		return api.Snapshot{}, err
	}
	if tok := f.token(); tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := f.client.Do(req)
	if err != nil {
		return api.Snapshot{}, fmt.Errorf("peer: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return api.Snapshot{}, fmt.Errorf("peer: %s", resp.Status)
	}
	if resp.Header.Get(instanceHeader) == f.self {
		return api.Snapshot{}, errSelf
	}
	b, err := readPeerAnswer(resp.Body)
	if err != nil {
		return api.Snapshot{}, err
	}
	select {
	case f.decodes <- struct{}{}:
		defer func() { <-f.decodes }()
	case <-ctx.Done():
		return api.Snapshot{}, fmt.Errorf("peer: %w", ctx.Err())
	}
	snap, err := decodePeerSnapshot(b)
	if err == nil && snap.Time.After(f.now().Add(time.Minute)) {
		// The fleet view takes the newest time of its parts.
		return api.Snapshot{}, fmt.Errorf("%w: its time %v is ahead of this collector's", ErrPeerAnswer, snap.Time)
	}
	return snap, err
}

// fleetStream is handleStream with fleet snapshots (under the same cap
// on streams and write deadline).
func (s httpAPI) fleetStream(w http.ResponseWriter, r *http.Request) {
	measure, n, err := s.parseLiveQuery(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error(), 0)
		return
	}
	s.serveEvents(w, r, func() ([]byte, error) {
		b, err := json.Marshal(s.fleetSnapshot(r.Context(), measure, n))
		if err != nil {
			return nil, err
		}
		return fmt.Appendf(nil, "event: snapshot\ndata: %s\n\n", b), nil
	})
}
