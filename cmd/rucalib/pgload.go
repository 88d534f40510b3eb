package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/qtop-dev/qtop/ru"
)

// pgload is the load-test half of the procedure, for PostgreSQL: it runs
// a mix of reads, writes, deletes and scans of varied sizes against a
// table of its own and writes the calibration CSV. The measured cost of
// each statement is what PostgreSQL reports doing for it under EXPLAIN
// (ANALYZE, BUFFERS, WAL): shared buffers hit, read, dirtied and written,
// plus WAL written in 8 KiB pages; its latency is the server's execution
// time. It is a subcommand so that the whole procedure (load test, then
// fit) runs from one tool, against a staging database.
func pgloadMain(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("rucalib pgload", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dsn := fs.String("dsn", os.Getenv("DATABASE_URL"), "PostgreSQL connection string (default $DATABASE_URL)")
	n := fs.Int("n", 3000, "statements to run")
	seed := fs.Uint64("seed", 1, "random seed of the operation mix")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage: rucalib pgload -dsn URL [-n 3000] [-seed 1] > load.csv

Runs reads, writes, deletes and scans against a table of its own (dropped
afterwards) and writes the calibration CSV that rucalib fits.

Examples:
  rucalib pgload -dsn 'postgres://qtop@staging-db/app' > load.csv && rucalib load.csv
  DATABASE_URL='postgres://qtop@staging-db/app' rucalib pgload -n 300 | rucalib -json > ru.json

Flags:
`)
		fs.PrintDefaults()
	}
	if code, ok := parse(fs, args, stdout); !ok {
		return code
	}
	if *dsn == "" || *n < 1 || fs.NArg() != 0 {
		fs.Usage()
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	if err := pgLoad(ctx, *dsn, *n, *seed, stdout); err != nil {
		fmt.Fprintf(stderr, "rucalib pgload: %v\n", err)
		return 1
	}
	return 0
}

// explained is the part of EXPLAIN's JSON output that pgLoad reads.
type explained struct {
	Plan struct {
		SharedHit     float64 `json:"Shared Hit Blocks"`
		SharedRead    float64 `json:"Shared Read Blocks"`
		SharedDirtied float64 `json:"Shared Dirtied Blocks"`
		SharedWritten float64 `json:"Shared Written Blocks"`
		WALBytes      float64 `json:"WAL Bytes"`
	} `json:"Plan"`
	ExecutionTime float64 `json:"Execution Time"`
}

// maxInline keeps payloads stored inline (no TOAST), so that the pages a
// statement touches follow the bytes it moves.
const maxInline = 1900

func pgLoad(ctx context.Context, dsn string, n int, seed uint64, w io.Writer) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(context.Background())
	table := fmt.Sprintf("rucalib_load_%d", conn.PgConn().PID())
	if _, err := conn.Exec(ctx, "CREATE TABLE "+table+" (id bigint PRIMARY KEY, payload bytea NOT NULL)"); err != nil {
		return fmt.Errorf("create table: %w", err)
	}
	defer conn.Exec(context.Background(), "DROP TABLE IF EXISTS "+table)

	r := rand.New(rand.NewPCG(seed, 0x5eed))
	const rows = 4000
	size := make(map[int64]int, rows)
	payload := func() []byte {
		b := make([]byte, r.IntN(maxInline+1))
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		return b
	}
	batch := &pgx.Batch{}
	for id := int64(0); id < rows; id++ {
		p := payload()
		size[id] = len(p)
		batch.Queue("INSERT INTO "+table+" VALUES ($1, $2)", id, p)
	}
	if err := conn.SendBatch(ctx, batch).Close(); err != nil {
		return fmt.Errorf("seed rows: %w", err)
	}
	if _, err := conn.Exec(ctx, "ANALYZE "+table); err != nil {
		return fmt.Errorf("analyze: %w", err)
	}

	fmt.Fprintln(w, "op,bytes,latency,cost")
	explain := "EXPLAIN (ANALYZE, BUFFERS, WAL, FORMAT JSON) "
	for i := 0; i < n; i++ {
		var (
			op    ru.Op
			bytes int
			sql   string
			args  []any
		)
		id := r.Int64N(rows)
		switch x := r.IntN(10); {
		case x < 4:
			op, bytes, sql, args = ru.OpRead, size[id], "SELECT payload FROM "+table+" WHERE id = $1", []any{id}
		case x < 7:
			p := payload()
			op, bytes, sql, args = ru.OpWrite, len(p), "INSERT INTO "+table+" VALUES ($1, $2) ON CONFLICT (id) DO UPDATE SET payload = excluded.payload", []any{id, p}
			size[id] = len(p)
		case x < 8:
			op, bytes, sql, args = ru.OpDelete, size[id], "DELETE FROM "+table+" WHERE id = $1", []any{id}
			delete(size, id)
		default:
			k := int64(1 + r.IntN(200))
			for j := id; j < id+k; j++ {
				bytes += size[j]
			}
			op, sql, args = ru.OpScan, "SELECT payload FROM "+table+" WHERE id BETWEEN $1 AND $2", []any{id, id + k - 1}
		}
		var out []byte
		if err := conn.QueryRow(ctx, explain+sql, args...).Scan(&out); err != nil {
			return fmt.Errorf("statement %d (%s): %w", i, op, err)
		}
		var ex []explained
		if err := json.Unmarshal(out, &ex); err != nil || len(ex) != 1 {
			return fmt.Errorf("statement %d: unexpected EXPLAIN output: %w", i, errors.Join(err, errors.New(string(out[:min(len(out), 200)]))))
		}
		e := ex[0]
		cost := e.Plan.SharedHit + e.Plan.SharedRead + e.Plan.SharedDirtied + e.Plan.SharedWritten + e.Plan.WALBytes/8192
		if _, err := fmt.Fprintf(w, "%s,%d,%.4fms,%.4f\n", op, bytes, e.ExecutionTime, cost); err != nil {
			return err
		}
	}
	return nil
}
