package meter

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/qtop-dev/qtop/policy"
	"github.com/qtop-dev/qtop/quota"
)

// ReplyContentType is the media type of a reply to POST /v1/reports.
const ReplyContentType = "application/json"

// MaxReplyBytes bounds a reply body; a policy of policy.MaxRules rules
// fits.
const MaxReplyBytes = 8 << 20

// Reply is the collector's answer to a report, as JSON:
//
//	{"accepted":true,"policy":{…},"retry_after_seconds":0,"message":""}
//
// The collector sends it with every status: 200 with Accepted true when
// the report was merged (or was a duplicate), 4xx when the report can
// never be accepted (the reporter drops it), 429 or 5xx with RetryAfter
// when it should be sent again later.
type Reply struct {
	// Accepted is true when the report was merged or already had been.
	Accepted bool
	// Policy is the current enforcement policy; nil when the collector
	// has none or did not change it.
	Policy *policy.Policy
	// RetryAfter asks the reporter to wait at least this long before its
	// next attempt (0: its own backoff decides).
	RetryAfter time.Duration
	// Message says why a report was refused.
	Message string
	// Quotas are the fleet-wide quota verdicts for the reporting process:
	// only the tenants it must limit (see quota.go).
	Quotas []quota.Verdict
}

type wireReply struct {
	Accepted   bool           `json:"accepted"`
	Policy     *policy.Policy `json:"policy,omitempty"`
	RetryAfter float64        `json:"retry_after_seconds,omitempty"`
	Message    string         `json:"message,omitempty"`
	Quotas     []wireVerdict  `json:"quotas,omitempty"`
}

// EncodeReply encodes r as JSON. The policy must pass policy.Validate.
func EncodeReply(r Reply) ([]byte, error) {
	if r.RetryAfter < 0 {
		return nil, fmt.Errorf("%w: retry after %v", ErrInvalid, r.RetryAfter)
	}
	if r.Policy != nil {
		if err := r.Policy.Validate(); err != nil {
			return nil, fmt.Errorf("%w: reply policy: %w", ErrInvalid, err)
		}
	}
	if len(r.Quotas) > MaxQuotaTenants {
		return nil, fmt.Errorf("%w: %d quota verdicts, at most %d", ErrTooLarge, len(r.Quotas), MaxQuotaTenants)
	}
	b, err := json.Marshal(wireReply{r.Accepted, r.Policy, r.RetryAfter.Seconds(), r.Message, toWireVerdicts(r.Quotas)})
	if err != nil {
		return nil, fmt.Errorf("%w: reply: %v", ErrInvalid, err)
	}
	if len(b) > MaxReplyBytes {
		return nil, fmt.Errorf("%w: reply of %d bytes, at most %d", ErrTooLarge, len(b), MaxReplyBytes)
	}
	return b, nil
}

// DecodeReply decodes a reply written by EncodeReply. A policy that does
// not pass policy.Validate is ErrMalformed: the reporter keeps the policy
// it had rather than apply half of a bad one.
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
	if w.Policy != nil {
		w.Policy.Upgrade() // from a collector of an older release: its looser checks
		if err := w.Policy.Validate(); err != nil {
			return Reply{}, fmt.Errorf("%w: reply policy: %w", ErrMalformed, err)
		}
	}
	quotas, err := fromWireVerdicts(w.Quotas)
	if err != nil {
		return Reply{}, err
	}
	return Reply{
		Quotas:     quotas,
		Accepted:   w.Accepted,
		Policy:     w.Policy,
		RetryAfter: time.Duration(w.RetryAfter * float64(time.Second)),
		Message:    w.Message,
	}, nil
}
