package main

import (
	"encoding/csv"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

func (r result) summaryLine() string {
	s := r.summary()
	return fmt.Sprintf("  %-8s max backlog %d, final backlog %d, p99 job latency %.1f ms, p99 lock wait %.2f ms (max %.1f), dead tuples max %d, analytics done %d, refused %d, warnings %d",
		r.mode, s.maxBacklog, s.finalBacklog, r.p99Latency, r.p99Lock, r.maxLock, s.maxDead, r.analyticsDone, s.refused, s.warnings)
}

type summary struct {
	maxBacklog, finalBacklog int64
	maxDead, minDead         int64
	meanDead                 float64
	refused, warnings        uint64
	jobsPerSecond            float64
}

func (r result) summary() summary {
	var s summary
	s.minDead = -1
	done := 0
	half := len(r.samples) / 2
	n := 0
	for i, x := range r.samples {
		s.maxBacklog = max(s.maxBacklog, x.Backlog)
		s.finalBacklog = x.Backlog
		s.maxDead = max(s.maxDead, x.Dead)
		if i >= half {
			if s.minDead < 0 || x.Dead < s.minDead {
				s.minDead = x.Dead
			}
			s.meanDead += float64(x.Dead)
			n++
		}
		s.refused, s.warnings = x.Refused, x.Warnings
		done += x.Done
	}
	if n > 0 {
		s.meanDead /= float64(n)
	}
	if len(r.samples) > 0 {
		s.jobsPerSecond = float64(done) / float64(len(r.samples))
	}
	return s
}

func write(o options, results []result) error {
	f, err := os.Create(filepath.Join(o.out, "queue.csv"))
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	w.Write([]string{"mode", "t_s", "backlog", "jobs_done", "p99_latency_ms", "p99_lock_ms", "dead_tuples", "analytics_running", "analytics_refused", "budget_warnings"})
	for _, r := range results {
		for _, x := range r.samples {
			w.Write([]string{r.mode, strconv.Itoa(x.T), strconv.FormatInt(x.Backlog, 10), strconv.Itoa(x.Done),
				strconv.FormatFloat(x.P99Latency, 'f', 2, 64), strconv.FormatFloat(x.P99Lock, 'f', 3, 64),
				strconv.FormatInt(x.Dead, 10), strconv.FormatInt(x.Analytics, 10),
				strconv.FormatUint(x.Refused, 10), strconv.FormatUint(x.Warnings, 10)})
		}
	}
	w.Flush()
	if err := w.Error(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Job queue: %d jobs/s, %d workers, three analytics statements of %v (tenant='analytics'), %v per mode, vacuum every %v.\n\n",
		o.rate, o.workers, o.analytics, o.duration, o.vacuum)
	b.WriteString("| mode | jobs/s done | max backlog | final backlog | p99 job latency | p99 lock wait | max lock wait | dead tuples max | dead tuples 2nd half min–mean | analytics done | refused | warnings |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range results {
		s := r.summary()
		fmt.Fprintf(&b, "| %s | %.0f | %d | %d | %.1f ms | %.2f ms | %.1f ms | %d | %d–%.0f | %d | %d | %d |\n",
			r.mode, s.jobsPerSecond, s.maxBacklog, s.finalBacklog, r.p99Latency, r.p99Lock, r.maxLock, s.maxDead,
			s.minDead, s.meanDead, r.analyticsDone, s.refused, s.warnings)
	}
	return os.WriteFile(filepath.Join(o.out, "queue.md"), []byte(b.String()), 0o644)
}
