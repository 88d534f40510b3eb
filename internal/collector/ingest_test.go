package collector

import (
	"encoding/json"
	"time"

	"github.com/qtop-dev/qtop/policy"
	"github.com/qtop-dev/qtop/report"
)

// ingest decodes and merges one report body as POST /v1/reports does,
// without HTTP, for tests: the status, the refusal reason and message, the
// Retry-After and the encoded reply.
func ingest(s *Server, body []byte) (status int, reason, msg string, retry time.Duration, reply []byte) {
	t0 := time.Now()
	d := s.in.take()
	defer s.in.give(d)
	var rep report.Reply
	err := reports.DecodeInto(&d.rep, body)
	if err == nil {
		rep, err = s.consume(d, body, t0)
	} else {
		err = errDecode{err}
	}
	if err != nil {
		status, reason, retry = refusalStatus(err)
		return status, reason, err.Error(), retry, nil
	}
	b, err := report.EncodeReply(rep)
	if err != nil {
		panic(err)
	}
	return 200, "", "", 0, b
}

// replyPolicy decodes the policy of a reply (nil when it has none).
func replyPolicy(r report.Reply) *policy.Policy {
	if len(r.Policy) == 0 {
		return nil
	}
	p := new(policy.Policy)
	if err := json.Unmarshal(r.Policy, p); err != nil {
		panic(err)
	}
	return p
}
