package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/qtop-dev/qtop/policy"
)

// Paths of the collector's freshness API: GET the view, POST (with the
// policy token) a new freshness policy.
const (
	PathFreshness       = "/v1/freshness"
	PathFreshnessPolicy = "/v1/policy/freshness"
)

// Freshness is the collector's view of freshness shedding: per route the
// share of sampled GETs that repeated the caller's previous response
// within the repeat window (24 h), and per rule and route what the fleet's
// freshness middleware matched, served and measured in the live window.
type Freshness struct {
	Time         time.Time         `json:"time"`
	RepeatWindow float64           `json:"repeat_window_seconds"`
	LiveWindow   float64           `json:"live_window_seconds"`
	Routes       []FreshnessRoute  `json:"routes"`
	Rules        []FreshnessRule   `json:"rules"`
	Policy       *policy.Freshness `json:"policy,omitempty"`
	Tracked      int               `json:"tracked_callers"`
	Untracked    uint64            `json:"untracked_samples"`
	Dropped      uint64            `json:"samples_dropped"`
}

// FreshnessRoute is one route of a Freshness view.
type FreshnessRoute struct {
	Route string `json:"route"`
	// Samples and Repeats are sampled GETs over the repeat window and
	// those whose response equalled the same caller's previous one on the
	// route, at most the window before.
	Samples     uint64  `json:"samples"`
	Repeats     uint64  `json:"repeats"`
	RepeatShare float64 `json:"repeat_share"`
	// Requests and Revalidated are the live window's GETs and 304s after
	// the handler ran.
	Requests    uint64 `json:"requests"`
	Revalidated uint64 `json:"revalidated"`
}

// FreshnessRule is one rule on one route over the live window.
type FreshnessRule struct {
	Rule    string `json:"rule"`
	Route   string `json:"route"`
	Matched uint64 `json:"matched"`
	Served  uint64 `json:"served"`
	Right   uint64 `json:"right"`
	Wrong   uint64 `json:"wrong"`
	// Precision is Right / (Right + Wrong), -1 when no shadow verdict.
	Precision float64 `json:"precision"`
	// Cut is Matched over the route's GETs.
	Cut float64 `json:"cut_share"`
}

// GetFreshness returns the collector's freshness view.
func (c *Client) GetFreshness(ctx context.Context) (Freshness, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url(PathFreshness, false), nil)
	if err != nil {
		return Freshness{}, err
	}
	c.authorize(req)
	var f Freshness
	if err := c.call(req, "get freshness", &f); err != nil {
		return Freshness{}, err
	}
	return f, nil
}

// PostFreshness replaces the freshness part of the collector's policy
// (token: the collector's bearer token) and returns the new policy.
func (c *Client) PostFreshness(ctx context.Context, f policy.Freshness, token string) (policy.Policy, error) {
	body, err := json.Marshal(f)
	if err != nil {
		return policy.Policy{}, fmt.Errorf("api: post freshness: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url(PathFreshnessPolicy, false), bytes.NewReader(body))
	if err != nil {
		return policy.Policy{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	return c.policyCall(req, "post freshness")
}
