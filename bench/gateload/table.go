package main

import (
	"fmt"
	"runtime"
	"time"
)

// clockTicks is the kernel's USER_HZ, the unit of /proc/PID/stat times
// (100 on Linux everywhere that matters).
const clockTicks = 100

type row struct {
	name  string
	r     result
	ticks ticks
	proxy bool
}

func numCPU() int { return runtime.NumCPU() }

func us(v int64) time.Duration { return time.Duration(v) * time.Microsecond }

func printTable(rows []row) {
	direct := rows[0].r.hist
	d50, d99 := direct.ValueAtQuantile(50), direct.ValueAtQuantile(99)
	fmt.Println("| target | ok / sent | p50 | p99 | p99.9 | added p50 | added p99 | CPU per request | of it system |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|")
	for _, x := range rows {
		h := x.r.hist
		p50, p99, p999 := h.ValueAtQuantile(50), h.ValueAtQuantile(99), h.ValueAtQuantile(99.9)
		added50, added99, cpu, sys := "—", "—", "—", "—"
		if x.proxy {
			added50, added99 = us(p50-d50).String(), us(p99-d99).String()
			if x.r.sent > 0 {
				per := func(t int64) string {
					return fmt.Sprintf("%.1f µs", float64(t)/clockTicks/float64(x.r.sent)*1e6)
				}
				cpu, sys = per(x.ticks.user+x.ticks.sys), per(x.ticks.sys)
			}
		}
		fmt.Printf("| %s | %d / %d | %v | %v | %v | %s | %s | %s | %s |\n", x.name, x.r.ok, x.r.sent,
			us(p50), us(p99), us(p999), added50, added99, cpu, sys)
	}
}
