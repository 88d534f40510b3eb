package collector

import (
	"strings"
	"time"
)

// Source admission. A process that reports for the first time is on
// probation: it is served, but it holds one of a bounded ring of
// probation places, the oldest of which a newer stranger takes. It is
// established — kept until idle, never evicted — once promoteAfter of its
// reports were accepted over more than one second, while fewer than
// Config.MaxSources sources are established. So a flood of junk sources
// (one report each, from addresses or names made up) only ever evicts
// other newcomers: real processes stay, and a new real process is served
// from its first report and established from its third.
const promoteAfter = 3

// admission is the probation ring of the source table.
type admission struct {
	ring        []*source // probationary sources in order of arrival (circular)
	head        int
	established int
}

func (s *Server) probationCap() int { return max(s.cfg.MaxSources/10, 16) }

// sourceLocked returns the source of key, admitting a new one on
// probation. s.mu is held.
func (s *Server) sourceLocked(key string, now time.Time) *source {
	if src := s.sources[key]; src != nil {
		return src
	}
	src := &source{key: strings.Clone(key), first: now.Unix()}
	a := &s.admit
	if n := s.probationCap(); len(a.ring) < n {
		a.ring = append(a.ring, src)
	} else {
		old := a.ring[a.head]
		if !old.est && s.sources[old.key] == old {
			delete(s.sources, old.key)
			s.guard.sourcesEvicted.Inc()
		}
		a.ring[a.head] = src
		a.head = (a.head + 1) % n
	}
	s.sources[src.key] = src
	return src
}

// acceptedLocked counts an accepted report of src at now and establishes
// it when it has earned it. s.mu is held.
func (s *Server) acceptedLocked(src *source, now time.Time) {
	src.accepted++
	if !src.est && src.accepted >= promoteAfter && now.Unix() > src.first && s.admit.established < s.cfg.MaxSources {
		src.est = true
		s.admit.established++
	}
}

// forgetLocked removes an idle source. s.mu is held.
func (s *Server) forgetLocked(key string, src *source) {
	if src.est {
		s.admit.established--
	}
	delete(s.sources, key)
}
