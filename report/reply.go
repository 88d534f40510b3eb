package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"time"
)

// ReplyContentType is the media type of a reply to POST /v1/reports.
const ReplyContentType = "application/json"

// AgeHeader is the HTTP header of POST /v1/reports that says how long the
// report waited at its reporter: whole milliseconds from the cut of its
// window to this attempt, on the reporter's own clock (so no skew between
// hosts enters it). A collector counts a report that waited long (a
// backlog sent after an outage) in its history, not as load of the
// current second. A report without it is taken as fresh.
const AgeHeader = "Qtop-Report-Age"

// MaxReplyBytes bounds a reply body; a policy within
// policy.MaxEncodedBytes (6 MiB as JSON) fits, with the quota verdicts.
const MaxReplyBytes = 8 << 20

// Reply is the collector's answer to a report, as JSON:
//
//	{"accepted":true,"policy":{…},"retry_after_seconds":0,"message":"","quotas":[…],"policy_view":{…}}
//
// The collector sends it with every status: 200 with Accepted true when
// the report was merged (or was a duplicate), 4xx when the report can
// never be accepted (the reporter drops it), 429 or 5xx with RetryAfter
// when it should be sent again later.
//
// The policy and the quota verdicts are JSON owned by their packages
// (policy.Policy, quota's verdicts): this package carries them as they
// are, and checks only that they are JSON values.
type Reply struct {
	// Accepted is true when the report was merged or already had been.
	Accepted bool
	// Policy is the current enforcement policy (a policy.Policy); empty
	// when the collector has none or did not change it.
	Policy json.RawMessage
	// RetryAfter asks the reporter to wait at least this long before its
	// next attempt (0: its own backoff decides).
	RetryAfter time.Duration
	// Message says why a report was refused.
	Message string
	// Quotas are the fleet-wide quota verdicts for the reporting process
	// (quota's wire form): only the tenants it must limit.
	Quotas json.RawMessage
	// PolicyView is the reporting process's view of the policy (a
	// policy.View), in place of Policy, for a report that carried a
	// PolicyView section; empty otherwise.
	PolicyView json.RawMessage
}

type wireReply struct {
	Accepted   bool            `json:"accepted"`
	Policy     json.RawMessage `json:"policy,omitempty"`
	RetryAfter float64         `json:"retry_after_seconds,omitempty"`
	Message    string          `json:"message,omitempty"`
	Quotas     json.RawMessage `json:"quotas,omitempty"`
	PolicyView json.RawMessage `json:"policy_view,omitempty"`
}

// EncodeReply encodes r as JSON. Policy and Quotas are written as they
// are, without being compacted again (the cost of a reply does not grow
// with its policy), so they must be compact JSON (as json.Marshal writes).
func EncodeReply(r Reply) ([]byte, error) {
	if r.RetryAfter < 0 {
		return nil, fmt.Errorf("%w: retry after %v", ErrInvalid, r.RetryAfter)
	}
	b := make([]byte, 0, 64+len(r.Policy)+len(r.Message)+len(r.Quotas)+len(r.PolicyView))
	b = append(b, `{"accepted":`...)
	b = strconv.AppendBool(b, r.Accepted)
	if len(r.Policy) > 0 {
		b = append(b, `,"policy":`...)
		b = append(b, r.Policy...)
	}
	if r.RetryAfter != 0 {
		f, err := json.Marshal(r.RetryAfter.Seconds())
		if err != nil {
			return nil, fmt.Errorf("%w: reply: %v", ErrInvalid, err)
		}
		b = append(b, `,"retry_after_seconds":`...)
		b = append(b, f...)
	}
	if r.Message != "" {
		m, err := json.Marshal(r.Message)
		if err != nil {
			return nil, fmt.Errorf("%w: reply: %v", ErrInvalid, err)
		}
		b = append(b, `,"message":`...)
		b = append(b, m...)
	}
	if len(r.Quotas) > 0 {
		b = append(b, `,"quotas":`...)
		b = append(b, r.Quotas...)
	}
	if len(r.PolicyView) > 0 {
		b = append(b, `,"policy_view":`...)
		b = append(b, r.PolicyView...)
	}
	b = append(b, '}')
	if len(b) > MaxReplyBytes {
		return nil, fmt.Errorf("%w: reply of %d bytes, at most %d", ErrTooLarge, len(b), MaxReplyBytes)
	}
	if (len(r.Policy) > 0 || len(r.Quotas) > 0 || len(r.PolicyView) > 0) && !json.Valid(b) {
		return nil, fmt.Errorf("%w: reply: policy or quotas are not JSON values", ErrInvalid)
	}
	return b, nil
}

// DecodeReply decodes a reply written by EncodeReply. The policy and the
// quotas are left to their packages to decode and check.
func DecodeReply(b []byte) (Reply, error) {
	if len(b) > MaxReplyBytes {
		return Reply{}, fmt.Errorf("%w: reply of %d bytes, at most %d", ErrTooLarge, len(b), MaxReplyBytes)
	}
	var w wireReply
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&w); err != nil {
		return Reply{}, fmt.Errorf("%w: reply: %v", ErrMalformed, err)
	}
	if dec.More() {
		return Reply{}, fmt.Errorf("%w: reply: data after the JSON object", ErrMalformed)
	}
	if !(w.RetryAfter >= 0) || w.RetryAfter > math.MaxInt64/float64(time.Second) {
		return Reply{}, fmt.Errorf("%w: reply: retry_after_seconds %v", ErrMalformed, w.RetryAfter)
	}
	if string(w.Policy) == "null" {
		w.Policy = nil
	}
	if string(w.Quotas) == "null" {
		w.Quotas = nil
	}
	if string(w.PolicyView) == "null" {
		w.PolicyView = nil
	}
	return Reply{
		Accepted:   w.Accepted,
		Policy:     w.Policy,
		RetryAfter: time.Duration(w.RetryAfter * float64(time.Second)),
		Message:    w.Message,
		Quotas:     w.Quotas,
		PolicyView: w.PolicyView,
	}, nil
}
