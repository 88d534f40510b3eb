package sim_test

import (
	"fmt"
	"os"

	"github.com/qtop-dev/qtop/enforce/sim"
)

func ExampleOvershoot() {
	rows, err := sim.Overshoot(sim.DefaultOvershoot())
	if err != nil {
		fmt.Println(err)
		return
	}
	sim.WriteOvershoot(os.Stdout, rows)
	// Output:
	// | limiter | RU allowed | RU admitted | overshoot |
	// |---|---|---|---|
	// | static QPS limit (planned cost) | 600000 | 1200898 | +100.15% |
	// | RU bucket, charged after the work | 600000 | 601025 | +0.17% |
}
