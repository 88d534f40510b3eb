package enforcesim_test

import (
	"fmt"
	"os"

	"github.com/qtop-dev/qtop/internal/enforcesim"
)

func ExampleOvershoot() {
	rows, err := enforcesim.Overshoot(enforcesim.DefaultOvershoot())
	if err != nil {
		fmt.Println(err)
		return
	}
	enforcesim.WriteOvershoot(os.Stdout, rows)
	// Output:
	// | limiter | RU allowed | RU admitted | overshoot |
	// |---|---|---|---|
	// | static QPS limit (planned cost) | 600000 | 1201546 | +100.26% |
	// | RU bucket, charged after the work | 600000 | 601025 | +0.17% |
}
