package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/qtop-dev/qtop/internal/testsvc"
	"github.com/qtop-dev/qtop/ru"
)

// TestPgloadCalibratesAgainstPostgres runs the whole procedure against a
// real PostgreSQL: the load test, then the fit.
func TestPgloadCalibratesAgainstPostgres(t *testing.T) {
	dsn := testsvc.Postgres(t)
	var csv, errOut bytes.Buffer
	if code := run([]string{"pgload", "-dsn", dsn, "-n", "1500", "-seed", "2"}, nil, &csv, &errOut); code != 0 {
		t.Fatalf("pgload exit %d: %s", code, errOut.String())
	}
	samples, err := ru.ReadSamples(bytes.NewReader(csv.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if len(samples) != 1500 {
		t.Fatalf("%d samples, want 1500", len(samples))
	}
	fit, err := ru.FitModel(samples, ru.DefaultModel())
	if err != nil {
		t.Fatal(err)
	}
	for op := 0; op < ru.NumOps; op++ {
		if !fit.Fitted[op] {
			t.Errorf("no %v in the load test", ru.Op(op))
		}
	}
	t.Logf("fit: %+v", fit.Model)
	t.Logf("R² %.3f RMSE %.3f", fit.R2, fit.RMSE)
	// What PostgreSQL does for these statements: a write dirties pages and
	// writes WAL that a point read does not, and scanning more bytes
	// touches more pages.
	if fit.Model.Base[ru.OpWrite] <= fit.Model.Base[ru.OpRead] {
		t.Errorf("write %v not dearer than read %v", fit.Model.Base[ru.OpWrite], fit.Model.Base[ru.OpRead])
	}
	if fit.Model.PerKiB <= 0 {
		t.Errorf("per KiB %v", fit.Model.PerKiB)
	}
	if fit.R2 < 0.5 {
		t.Errorf("R² %v: the model explains little of PostgreSQL's work", fit.R2)
	}
	// The load test's table is gone.
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var left int
	if err := conn.QueryRow(context.Background(), "SELECT count(*) FROM pg_tables WHERE tablename LIKE 'rucalib_load_%'").Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Errorf("%d load-test tables left behind", left)
	}
}

func TestPgloadErrors(t *testing.T) {
	var out, errOut bytes.Buffer
	t.Setenv("DATABASE_URL", "")
	if code := run([]string{"pgload"}, nil, &out, &errOut); code != 2 {
		t.Errorf("no dsn: exit %d", code)
	}
	if code := run([]string{"pgload", "-dsn", "postgres://nobody@127.0.0.1:1/none?connect_timeout=2", "-n", "1"}, nil, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), "connect") {
		t.Errorf("unreachable server: exit %d, %q", code, errOut.String())
	}
}
