package collector

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/qtop-dev/qtop/policy"
	"github.com/qtop-dev/qtop/report"
	"github.com/qtop-dev/qtop/store"
	"github.com/qtop-dev/qtop/tenant"
)

// maxPolicyBody bounds a POST /v1/policy body (one rule).
const maxPolicyBody = 64 << 10

const policyFile = "policy.json"

func randomToken() string {
	b := make([]byte, 16)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// policyPart is the policy: the rules, budgets, runaway rules and
// freshness rules that reach every process in its reply. Every change
// goes through one commit path (change), is saved in DataDir and
// audited. Its lock guards the policy and the encoded reply; it is taken
// after the server's and the features' locks, and nothing is called
// while it is held.
type policyPart struct {
	mu sync.Mutex
	p  policy.Policy
	// replyJSON is the policy as a reply carries it (nil: it cannot be
	// sent), encoded once per version: for replyVersion when replySet.
	replyJSON    []byte
	replyVersion uint64
	replySet     bool

	dir     string // DataDir
	log     *slog.Logger
	changes prometheus.Counter
	store   store.Store // for the audit; nil: none (set once by New)
}

// load reads the policy kept in DataDir; a missing file is an empty
// policy.
func (pp *policyPart) load() error {
	b, err := os.ReadFile(filepath.Join(pp.dir, policyFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("collector: policy: %w", err)
	}
	var p policy.Policy
	if err := json.Unmarshal(b, &p); err != nil {
		return fmt.Errorf("collector: policy file %s: %w", policyFile, err)
	}
	for _, c := range p.Upgrade() { // saved under an older release's checks
		pp.log.Warn("policy file upgraded to the current checks", "file", policyFile, "change", c)
	}
	enc, err := p.Encode()
	if err != nil {
		return fmt.Errorf("collector: policy file %s: %w", policyFile, err)
	}
	pp.p = p
	pp.keepLocked(enc)
	return nil
}

// saveLocked saves the policy to DataDir and keeps its encoding for the
// replies; enc is that encoding, validated, when the caller has it (nil:
// it is made here). A policy at 10,000 rules is megabytes of JSON, so it
// is encoded once per version, not for each use.
func (pp *policyPart) saveLocked(enc []byte) {
	b := enc
	if b == nil {
		var err error
		if enc, err = pp.p.Encode(); err != nil {
			pp.log.Error("policy cannot be encoded in replies; sending none", "err", err)
			b, _ = json.Marshal(pp.p) // saved all the same, as it came
		} else {
			b = enc
		}
	}
	pp.keepLocked(enc)
	tmp := filepath.Join(pp.dir, policyFile+".tmp")
	err := os.WriteFile(tmp, append(b[:len(b):len(b)], '\n'), 0o600)
	if err == nil {
		err = os.Rename(tmp, filepath.Join(pp.dir, policyFile))
	}
	if err != nil {
		pp.log.Error("policy: save", "err", err)
	}
}

// keepLocked keeps enc as the current version's encoding (nil: the
// policy cannot be sent).
func (pp *policyPart) keepLocked(enc []byte) {
	pp.replyJSON, pp.replyVersion, pp.replySet = enc, pp.p.Version, true
}

// reply returns the reply of an accepted report, which carries the
// current policy, encoded once per version.
func (pp *policyPart) reply() report.Reply {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	if !pp.replySet || pp.replyVersion != pp.p.Version {
		enc, err := pp.p.Encode()
		if err != nil {
			pp.log.Error("policy cannot be encoded in replies; sending none", "err", err)
		}
		pp.keepLocked(enc)
	}
	return report.Reply{Accepted: true, Policy: pp.replyJSON}
}

// writePolicy answers a policy change with p, the policy it made.
func (s httpAPI) writePolicy(w http.ResponseWriter, p policy.Policy) {
	b, err := s.policy.encoded(p)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error(), 0)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	w.Write(b)
	w.Write([]byte("\n"))
}

// encoded is the JSON of p, a policy this part handed out: the kept
// encoding while p is still the current version.
func (pp *policyPart) encoded(p policy.Policy) ([]byte, error) {
	pp.mu.Lock()
	if pp.replySet && pp.replyJSON != nil && pp.replyVersion == p.Version && pp.p.Version == p.Version {
		b := pp.replyJSON
		pp.mu.Unlock()
		return b, nil
	}
	pp.mu.Unlock()
	return json.Marshal(p)
}

// prune drops expired rules; it reports whether any was.
func (pp *policyPart) prune(now time.Time) bool {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	active := pp.p.Active(now)
	if len(active) == len(pp.p.Rules) {
		return false
	}
	pp.p.Rules = active
	pp.p.Version++
	pp.p.Updated = now.UTC()
	pp.saveLocked(nil)
	return true
}

// current returns a copy of the policy.
func (pp *policyPart) current() policy.Policy {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	return clonePolicy(pp.p)
}

// read calls f with the policy, under the part's lock: f must not keep
// it nor call anything that takes a lock.
func (pp *policyPart) read(f func(p *policy.Policy)) {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	f(&pp.p)
}

// For is the policy's effect on a request with tags at now.
func (pp *policyPart) For(tags tenant.Tags, now time.Time) policy.Effect {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	return pp.p.For(tags, now)
}

// adopt makes p (the fleet's shared policy) the policy when it is newer.
// The shared log carries the rules and the autopilot's part; budgets,
// runaway rules and freshness stay this collector's own.
func (pp *policyPart) adopt(p policy.Policy) bool {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	if p.Version <= pp.p.Version {
		return false
	}
	p.Budgets, p.Runaway, p.Freshness = pp.p.Budgets, pp.p.Runaway, pp.p.Freshness
	pp.p = p
	pp.saveLocked(nil)
	return true
}

func clonePolicy(p policy.Policy) policy.Policy {
	p.Rules = append([]policy.Rule(nil), p.Rules...)
	return p
}

// setRule adds rule, or replaces the rule with its ID, or (when it has
// expired) removes that rule (see Server.SetRule).
func (pp *policyPart) setRule(ctx context.Context, now time.Time, maxTTL time.Duration, rule policy.Rule, who string, allowT0 bool) (policy.Policy, error) {
	lift := !rule.Expires.IsZero() && !now.Before(rule.Expires)
	if !lift {
		if err := checkRule(rule, now, maxTTL, allowT0); err != nil {
			return policy.Policy{}, err
		}
	}
	if rule.ID == "" {
		if lift {
			return policy.Policy{}, fmt.Errorf("%w: expires %v is not in the future: a rule that expires now lifts the rule of its id, and this one has none (give a later expires to add a rule, or the id to lift one)", policy.ErrInvalid, rule.Expires.UTC())
		}
		rule.ID = randomToken()[:12]
	}
	if len(rule.ID) > 128 {
		return policy.Policy{}, fmt.Errorf("%w: id longer than 128 bytes", policy.ErrInvalid)
	}
	rule.CreatedBy = who
	rule.Created = now
	if err := rule.Validate(); err != nil {
		return policy.Policy{}, err
	}
	action := "add"
	out, err := pp.change(now, func(next *policy.Policy) error {
		rules := make([]policy.Rule, 0, len(next.Rules)+1)
		for _, r := range next.Rules {
			if r.ID == rule.ID {
				action = "replace"
				continue
			}
			rules = append(rules, r)
		}
		if lift {
			if action != "replace" {
				return fmt.Errorf("%w: no rule %q to lift", policy.ErrInvalid, rule.ID)
			}
			action = "lift"
		} else {
			rules = append(rules, rule)
		}
		next.Rules = rules
		return nil
	})
	if err != nil {
		return policy.Policy{}, err
	}
	pp.audit(ctx, now, who, action, out.Version, rule)
	return out, nil
}

// change makes edit's change to a copy of the policy the policy, at the
// next version: what has expired goes with any change, the whole is
// validated, saved to DataDir, and a copy returned to hand out. Every
// policy change goes through it, so that a change to one part (rules,
// budgets and runaway rules, freshness) keeps the others.
func (pp *policyPart) change(now time.Time, edit func(next *policy.Policy) error) (policy.Policy, error) {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	next := clonePolicy(pp.p)
	if err := edit(&next); err != nil {
		return policy.Policy{}, err
	}
	next.Version, next.Updated = pp.p.Version+1, now
	next.Rules = next.Active(now)
	next.Budgets, next.Runaway = next.ActiveBudgets(now)
	enc, err := next.Encode()
	if err != nil {
		return policy.Policy{}, err
	}
	pp.p = next
	pp.saveLocked(enc)
	pp.changes.Inc()
	return clonePolicy(pp.p), nil
}

// audit logs a policy change and writes it to the store's audit: who made
// it, what (action and the changed part, as JSON) and the version it
// made.
func (pp *policyPart) audit(ctx context.Context, now time.Time, who, action string, version uint64, what any) {
	wj, _ := json.Marshal(what)
	pp.log.Info("policy changed", "who", who, "action", action, "version", version, "rule", string(wj))
	if pp.store == nil {
		return
	}
	a := []store.Audit{{Time: now, Who: who, Action: action, PolicyVersion: version, Rule: string(wj)}}
	if err := pp.store.WriteAudit(ctx, a); err != nil {
		pp.log.Error("policy audit not written", "err", err, "rule", string(wj))
	}
}

// policyPost is what every policy change begins with: the admin
// credential and a bounded body. It answers a refusal itself (ok false);
// who names the credential, never a header the client sets, and the
// address it came from.
func (s httpAPI) policyPost(w http.ResponseWriter, r *http.Request, what string) (body []byte, who string, ok bool) {
	cred, err := s.Authorize(r, RoleAdmin)
	if err != nil {
		w.Header().Set("WWW-Authenticate", `Bearer realm="qtop"`)
		writeError(w, http.StatusUnauthorized, what+": needs the admin token: "+err.Error(), 0)
		return nil, "", false
	}
	body, err = io.ReadAll(http.MaxBytesReader(w, r.Body, maxPolicyBody))
	if err != nil {
		status, msg := bodyReadError(what, err)
		writeError(w, status, msg, 0)
		return nil, "", false
	}
	if !utf8.Valid(body) {
		// encoding/json would turn each bad byte into U+FFFD: a rule for
		// a tenant no report can name (reports clean such bytes apart).
		writeError(w, http.StatusBadRequest, what+" body is not UTF-8: send JSON in UTF-8", 0)
		return nil, "", false
	}
	return body, cred + "@" + r.RemoteAddr, true
}

// bodyReadError maps a failed read of a policy body to its answer: 413
// for a body over maxPolicyBody, 408 for one that did not arrive within
// the server's read timeout, 400 for one cut short or unreadable. The
// message never carries the read error itself, which names addresses.
func bodyReadError(what string, err error) (int, string) {
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return http.StatusRequestEntityTooLarge, fmt.Sprintf("%s body larger than %d bytes: send one object of at most that size", what, maxPolicyBody)
	case isTimeout(err): // door.go
		return http.StatusRequestTimeout, what + " body not received in time: send it again, whole"
	}
	return http.StatusBadRequest, what + " request body cut short or unreadable: send it again, whole"
}

func (s httpAPI) handlePolicy(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		s.authorized(RoleRead, func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, http.StatusOK, s.policyStatus())
		})(w, r)
	case http.MethodPost:
		body, who, ok := s.policyPost(w, r, "policy")
		if !ok {
			return
		}
		var rule policy.Rule
		if err := decodeOne(body, &rule, ruleExample); err != nil {
			writeError(w, http.StatusBadRequest, "policy rule: "+err.Error(), 0)
			return
		}
		if err := rateGiven(body, rule, s.cfg.Now()); err != nil {
			writeError(w, http.StatusBadRequest, "policy rule: "+err.Error(), 0)
			return
		}
		allowT0 := false
		var err error
		if v := r.URL.Query().Get("allow_t0"); v != "" {
			if allowT0, err = strconv.ParseBool(v); err != nil {
				writeError(w, http.StatusBadRequest, fmt.Sprintf("allow_t0=%q: want true or false", v), 0)
				return
			}
		}
		p, err := s.policy.setRule(r.Context(), s.cfg.Now().UTC(), s.cfg.MaxRuleTTL, rule, who, allowT0)
		if err != nil {
			writeError(w, http.StatusBadRequest, err.Error(), 0)
			return
		}
		s.writePolicy(w, p)
	default:
		w.Header().Set("Allow", "GET, POST")
		writeError(w, http.StatusMethodNotAllowed, "use GET or POST", 0)
	}
}

// ruleExample is the body of POST /v1/policy in its refusals.
const ruleExample = `{"tenant":"acme","action":"throttle","ru_per_second":500,"expires":"2026-07-01T18:00:00Z","reason":"import"}`

// rateGiven refuses a throttle or quota rule whose body does not name
// ru_per_second: left out, it reads as 0, which refuses every request of
// the tenant (fleet-wide for a quota), and a rule sent without it more
// likely forgot it than meant that. A rule that has already expired (a
// lift) needs no rate.
func rateGiven(body []byte, rule policy.Rule, now time.Time) error {
	if (rule.Action != policy.Throttle && rule.Action != policy.Quota) || rule.RUPerSecond != 0 ||
		(!rule.Expires.IsZero() && !rule.Expires.After(now)) {
		return nil
	}
	var keys map[string]json.RawMessage
	if json.Unmarshal(body, &keys) == nil {
		for k := range keys {
			if strings.EqualFold(k, "ru_per_second") {
				return nil
			}
		}
	}
	return fmt.Errorf("a %s rule needs ru_per_second, the RU/s it allows: send \"ru_per_second\":0 to refuse all of it", rule.Action)
}

// Policy returns the current policy.
func (s *Server) Policy() policy.Policy { return s.policy.current() }

// SetRule adds rule, or replaces the rule with its ID, or (when it has
// expired) removes that rule; who is recorded in the audit. It returns the
// new policy. A rule is refused when it does not make sense (see
// checkRule); a rule on tier T0 needs SetRuleAllowT0.
func (s *Server) SetRule(ctx context.Context, rule policy.Rule, who string) (policy.Policy, error) {
	return s.policy.setRule(ctx, s.cfg.Now().UTC(), s.cfg.MaxRuleTTL, rule, who, false)
}

// SetRuleAllowT0 is SetRule with the override that lets a rule throttle
// or price tier T0, which is otherwise never shed.
func (s *Server) SetRuleAllowT0(ctx context.Context, rule policy.Rule, who string) (policy.Policy, error) {
	return s.policy.setRule(ctx, s.cfg.Now().UTC(), s.cfg.MaxRuleTTL, rule, who, true)
}
