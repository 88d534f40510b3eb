package enforcesim

import (
	"fmt"
	"io"
	"time"
)

func ms(d time.Duration) string {
	switch {
	case d < 0:
		return "never"
	case d >= 10*time.Second:
		return fmt.Sprintf("%.0f s", d.Seconds())
	case d >= time.Second:
		return fmt.Sprintf("%.2f s", d.Seconds())
	default:
		return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond))
	}
}

func pct(f float64) string { return fmt.Sprintf("%.1f%%", 100*f) }

// WriteFair writes the fair-queue table.
func WriteFair(w io.Writer, rows []FairRow) {
	fmt.Fprintln(w, "| queue | big tenant wait p50 / p99 / max | small tenants wait p50 / p99 / max | all done |")
	fmt.Fprintln(w, "|---|---|---|---|")
	for _, r := range rows {
		fmt.Fprintf(w, "| %s | %s / %s / %s | %s / %s / %s | %s |\n", r.Mode,
			ms(r.Big.P50), ms(r.Big.P99), ms(r.Big.Max), ms(r.Small.P50), ms(r.Small.P99), ms(r.Small.Max), ms(r.Makespan))
	}
}

// WriteStorm writes the hot-key storm table.
func WriteStorm(w io.Writer, rows []StormRow) {
	fmt.Fprintln(w, "| defence | requests | backend calls | per key per TTL (mean) | per key per TTL after the first window (max) |")
	fmt.Fprintln(w, "|---|---|---|---|---|")
	for _, r := range rows {
		fmt.Fprintf(w, "| %s | %d | %d | %.1f | %d |\n", r.Mode, r.Requests, r.BackendCalls, r.PerKeyPerTTL, r.MaxAfterFirst)
	}
}

// WriteOverload writes the mixed-tier overload table.
func WriteOverload(w io.Writer, rows []OverloadRow) {
	fmt.Fprintln(w, "| protection | goodput T0 / T1 / T2 / T3 (whole run) | goodput during the spike | RU/s admitted in the spike | worst 1 s p95 | recovery after the spike |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|")
	for _, r := range rows {
		fmt.Fprintf(w, "| %s | %s / %s / %s / %s | %s / %s / %s / %s | %.0f | %s | %s |\n", r.Mode,
			pct(r.Goodput[0]), pct(r.Goodput[1]), pct(r.Goodput[2]), pct(r.Goodput[3]),
			pct(r.SpikeGoodput[0]), pct(r.SpikeGoodput[1]), pct(r.SpikeGoodput[2]), pct(r.SpikeGoodput[3]),
			r.AdmittedRU, ms(r.PeakP95), ms(r.Recovery))
	}
}

// WriteOvershoot writes the steady-overload table.
func WriteOvershoot(w io.Writer, rows []OvershootRow) {
	fmt.Fprintln(w, "| limiter | RU allowed | RU admitted | overshoot |")
	fmt.Fprintln(w, "|---|---|---|---|")
	for _, r := range rows {
		fmt.Fprintf(w, "| %s | %.0f | %.0f | %+.2f%% |\n", r.Mode, r.LimitRU, r.AdmittedRU, 100*r.Overshoot)
	}
}

// Deterministic runs the three scenarios that do not depend on goroutine
// scheduling (everything but the storm) and writes their tables.
func Deterministic(w io.Writer) error {
	f, err := Fair(DefaultFair())
	if err != nil {
		return err
	}
	o, err := Overload(DefaultOverload())
	if err != nil {
		return err
	}
	s, err := Overshoot(DefaultOvershoot())
	if err != nil {
		return err
	}
	writeTables(w, f, o, s)
	return nil
}

func writeTables(w io.Writer, f []FairRow, o []OverloadRow, s []OvershootRow) {
	fmt.Fprintln(w, "Fair queue:")
	fmt.Fprintln(w)
	WriteFair(w, f)
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Overload with mixed tiers:")
	fmt.Fprintln(w)
	WriteOverload(w, o)
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Steady overload against an RU limit:")
	fmt.Fprintln(w)
	WriteOvershoot(w, s)
}
