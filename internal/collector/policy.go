package collector

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/qtop-dev/qtop/policy"
	"github.com/qtop-dev/qtop/report"
	"github.com/qtop-dev/qtop/store"
)

// maxPolicyBody bounds a POST /v1/policy body (one rule).
const maxPolicyBody = 64 << 10

const policyFile = "policy.json"

func randomToken() string {
	b := make([]byte, 16)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// loadPolicy reads the policy kept in DataDir; a missing file is an empty
// policy.
func (s *Server) loadPolicy() error {
	b, err := os.ReadFile(filepath.Join(s.cfg.DataDir, policyFile))
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
	if err := p.Validate(); err != nil {
		return fmt.Errorf("collector: policy file %s: %w", policyFile, err)
	}
	s.policy = p
	return nil
}

func (s *Server) savePolicyLocked() error {
	b, err := json.MarshalIndent(s.policy, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(s.cfg.DataDir, policyFile+".tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(s.cfg.DataDir, policyFile))
}

// replyLocked returns the reply of an accepted report, which carries the
// current policy; the policy is encoded once per version.
func (s *Server) replyLocked() report.Reply {
	if s.reply != nil && s.replyVersion == s.policy.Version {
		return report.Reply{Accepted: true, Policy: s.reply}
	}
	err := s.policy.Validate()
	var pj []byte
	if err == nil {
		pj, err = json.Marshal(s.policy)
	}
	if err != nil {
		s.log.Error("policy cannot be encoded in replies; sending none", "err", err)
		pj = nil
	}
	s.reply, s.replyVersion = pj, s.policy.Version
	return report.Reply{Accepted: true, Policy: pj}
}

// prunePolicyLocked drops expired rules; it reports whether any was.
func (s *Server) prunePolicyLocked(now time.Time) bool {
	active := s.policy.Active(now)
	if len(active) == len(s.policy.Rules) {
		return false
	}
	s.policy.Rules = active
	s.policy.Version++
	s.policy.Updated = now.UTC()
	if err := s.savePolicyLocked(); err != nil {
		s.log.Error("policy: save", "err", err)
	}
	return true
}

// Policy returns the current policy.
func (s *Server) Policy() policy.Policy {
	s.mu.Lock()
	defer s.mu.Unlock()
	return clonePolicy(s.policy)
}

func clonePolicy(p policy.Policy) policy.Policy {
	p.Rules = append([]policy.Rule(nil), p.Rules...)
	return p
}

// SetRule adds rule, or replaces the rule with its ID, or (when it has
// expired) removes that rule; who is recorded in the audit. It returns the
// new policy. A rule is refused when it does not make sense (see
// checkRule); a rule on tier T0 needs SetRuleAllowT0.
func (s *Server) SetRule(ctx context.Context, rule policy.Rule, who string) (policy.Policy, error) {
	return s.setRule(ctx, rule, who, false)
}

// SetRuleAllowT0 is SetRule with the override that lets a rule throttle
// or price tier T0, which is otherwise never shed.
func (s *Server) SetRuleAllowT0(ctx context.Context, rule policy.Rule, who string) (policy.Policy, error) {
	return s.setRule(ctx, rule, who, true)
}

func (s *Server) setRule(ctx context.Context, rule policy.Rule, who string, allowT0 bool) (policy.Policy, error) {
	now := s.cfg.Now().UTC()
	lift := !rule.Expires.IsZero() && !now.Before(rule.Expires)
	if !lift {
		if err := checkRule(rule, now, s.cfg.MaxRuleTTL, allowT0); err != nil {
			return policy.Policy{}, err
		}
	}
	if rule.ID == "" {
		if lift {
			return policy.Policy{}, fmt.Errorf("%w: lifting a rule needs its id", policy.ErrInvalid)
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
	s.mu.Lock()
	action := "add"
	rules := make([]policy.Rule, 0, len(s.policy.Rules)+1)
	for _, r := range s.policy.Rules {
		if r.ID == rule.ID {
			action = "replace"
			continue
		}
		rules = append(rules, r)
	}
	if lift {
		if action != "replace" {
			s.mu.Unlock()
			return policy.Policy{}, fmt.Errorf("%w: no rule %q to lift", policy.ErrInvalid, rule.ID)
		}
		action = "lift"
	} else {
		rules = append(rules, rule)
	}
	next := clonePolicy(s.policy)
	next.Rules = rules
	out, err := s.commitPolicyLocked(next, now)
	s.mu.Unlock()
	if err != nil {
		return policy.Policy{}, err
	}
	s.auditPolicy(ctx, now, who, action, out.Version, rule)
	return out, nil
}

// commitPolicyLocked makes next — a copy of the policy with one of its
// parts changed — the policy, at the next version: what has expired goes
// with any change, the whole is validated, saved to DataDir, and a copy
// returned to hand out. Every policy change goes through it, so that a
// change to one part (rules, budgets and runaway rules, freshness) keeps
// the others. s.mu is held.
func (s *Server) commitPolicyLocked(next policy.Policy, now time.Time) (policy.Policy, error) {
	next.Version, next.Updated = s.policy.Version+1, now
	next.Rules = next.Active(now)
	next.Budgets, next.Runaway = next.ActiveBudgets(now)
	if err := next.Validate(); err != nil {
		return policy.Policy{}, err
	}
	s.policy = next
	if err := s.savePolicyLocked(); err != nil {
		s.log.Error("policy: save", "err", err)
	}
	s.met.policyChanges.Inc()
	return clonePolicy(s.policy), nil
}

// auditPolicy logs a policy change and writes it to the store's audit:
// who made it, what (action and the changed part, as JSON) and the
// version it made.
func (s *Server) auditPolicy(ctx context.Context, now time.Time, who, action string, version uint64, what any) {
	wj, _ := json.Marshal(what)
	s.log.Info("policy changed", "who", who, "action", action, "version", version, "rule", string(wj))
	if s.store == nil {
		return
	}
	a := []store.Audit{{Time: now, Who: who, Action: action, PolicyVersion: version, Rule: string(wj)}}
	if err := s.store.WriteAudit(ctx, a); err != nil {
		s.log.Error("policy audit not written", "err", err, "rule", string(wj))
	}
}

// policyPost is what every policy change begins with: the admin
// credential and a bounded body. It answers a refusal itself (ok false);
// who names the credential, never a header the client sets, and the
// address it came from.
func (s *Server) policyPost(w http.ResponseWriter, r *http.Request, what string) (body []byte, who string, ok bool) {
	cred, err := s.Authorize(r, RoleAdmin)
	if err != nil {
		w.Header().Set("WWW-Authenticate", `Bearer realm="qtop"`)
		writeError(w, http.StatusUnauthorized, "policy changes need the admin token: "+err.Error(), 0)
		return nil, "", false
	}
	body, err = io.ReadAll(http.MaxBytesReader(w, r.Body, maxPolicyBody))
	if err != nil {
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("%s body larger than %d bytes", what, maxPolicyBody), 0)
		return nil, "", false
	}
	return body, cred + "@" + r.RemoteAddr, true
}

// decodeOne decodes exactly one JSON object of body into v, refusing
// unknown fields and anything after the object.
func decodeOne(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("data after the JSON object (send one)")
	}
	return nil
}

func (s *Server) handlePolicy(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		s.authorized(RoleRead, func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, http.StatusOK, s.Policy())
		})(w, r)
	case http.MethodPost:
		body, who, ok := s.policyPost(w, r, "policy")
		if !ok {
			return
		}
		var rule policy.Rule
		if err := decodeOne(body, &rule); err != nil {
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
		p, err := s.setRule(r.Context(), rule, who, allowT0)
		if err != nil {
			writeError(w, http.StatusBadRequest, err.Error(), 0)
			return
		}
		writeJSON(w, http.StatusOK, p)
	default:
		w.Header().Set("Allow", "GET, POST")
		writeError(w, http.StatusMethodNotAllowed, "use GET or POST", 0)
	}
}
