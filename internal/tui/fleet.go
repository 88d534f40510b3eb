package tui

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/policy"
)

// MaxFleet bounds the collectors one Fleet follows.
const MaxFleet = 64

// fleetWait bounds how long Next waits for the slowest collector.
const fleetWait = 2 * time.Second

// Fleet follows several collectors that each receive part of the fleet's
// reports, and shows their sum (live.Merge): every collector is asked for
// its own view (scope=local) with up to 1000 tenants, so a tenant's load
// is exact wherever a collector lists it. A collector that does not answer
// is left out of that snapshot and named in Snapshot.Peers. Throttles go
// to the first collector that takes them: run the collectors with
// --shared-policy so that one change reaches them all. The autopilot shown
// is that of the collector that acts; A goes to every collector, x to the
// one that has the action (autopilot.go).
type Fleet struct {
	members []*Collector
}

var _ Source = (*Fleet)(nil)

// NewFleet returns a source over the collectors at bases (host:port or
// http://host:port each); token is the read token of their live views,
// adminToken that of their policy ("": token); opts are added to each
// member's client (api.WithHTTPClient for TLS, for instance).
func NewFleet(bases []string, token, adminToken string, opts ...api.ClientOption) (*Fleet, error) {
	if adminToken == "" {
		adminToken = token
	}
	if len(bases) == 0 || len(bases) > MaxFleet {
		return nil, fmt.Errorf("%w: --collector: 1 to %d collectors, got %d", ErrInput, MaxFleet, len(bases))
	}
	f := &Fleet{}
	seen := make(map[string]bool, len(bases))
	for _, b := range bases {
		c, err := NewCollector(strings.TrimSpace(b), adminToken, append([]api.ClientOption{api.WithScope(api.ScopeLocal), api.WithToken(token)}, opts...)...)
		if err != nil {
			return nil, err
		}
		k := sameCollector(c.url())
		if seen[k] {
			return nil, fmt.Errorf("%w: --collector names %s twice: its load would count twice in the sum", ErrInput, c.url())
		}
		seen[k] = true
		f.members = append(f.members, c)
	}
	return f, nil
}

// sameCollector is what two spellings of one collector's address share:
// the scheme, the host in lower case, the port and the path without its
// trailing slash.
func sameCollector(base string) string {
	u, err := url.Parse(base)
	if err != nil { // checked by NewCollector
		return base
	}
	return u.Scheme + "://" + strings.ToLower(u.Host) + strings.TrimSuffix(u.Path, "/")
}

// Describe names the collectors.
func (f *Fleet) Describe() string {
	var urls []string
	for _, c := range f.members {
		urls = append(urls, c.url())
	}
	return fmt.Sprintf("fleet of %d collectors %s", len(urls), strings.Join(urls, ","))
}

// Features: a fleet takes throttles.
func (f *Fleet) Features() Features { return Features{Throttle: true} }

// Next returns the merged next snapshots of every collector that answers
// within fleetWait.
func (f *Fleet) Next(ctx context.Context, q Query) (api.Snapshot, error) {
	ask := Query{Measure: q.Measure, Top: 1000}
	ctx, cancel := context.WithTimeout(ctx, fleetWait)
	defer cancel()
	snaps := make([]api.Snapshot, len(f.members))
	errs := make([]error, len(f.members))
	var wg sync.WaitGroup
	for i, c := range f.members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			snaps[i], errs[i] = c.Next(ctx, ask)
		}()
	}
	wg.Wait()
	var got []api.Snapshot
	var peers []api.PeerStatus
	for i, c := range f.members {
		st := api.PeerStatus{Collector: c.url(), OK: errs[i] == nil}
		if errs[i] != nil {
			st.Error = errs[i].Error()
		} else {
			st.Time = snaps[i].Time
			got = append(got, snaps[i])
		}
		peers = append(peers, st)
	}
	if len(got) == 0 {
		return api.Snapshot{}, errors.Join(errs...)
	}
	s := api.Merge(got, q.Measure, q.Top)
	s.Peers = peers
	s.Autopilot = fleetPilot(got)
	return s, nil
}

// Throttle posts rule to the first collector that takes it.
func (f *Fleet) Throttle(ctx context.Context, rule policy.Rule) error {
	var errs []error
	for _, c := range f.members {
		err := c.Throttle(ctx, rule)
		if err == nil {
			return nil
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Cancel is not supported: collectors do not signal backends.
func (f *Fleet) Cancel(ctx context.Context, pid int32) error { return f.members[0].Cancel(ctx, pid) }

// Terminate is not supported: collectors do not signal backends.
func (f *Fleet) Terminate(ctx context.Context, pid int32) error {
	return f.members[0].Terminate(ctx, pid)
}

// Close closes every collector's stream.
func (f *Fleet) Close() error {
	for _, c := range f.members {
		c.Close()
	}
	return nil
}
