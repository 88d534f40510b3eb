package store

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

const childEnv = "QTOP_SPOOL_KILL_CHILD_DIR"

// TestSpoolKillChild is the child of TestSpoolSurvivesKill: it spools
// batches to a store that is down, printing each acknowledged batch,
// until it is killed.
func TestSpoolKillChild(t *testing.T) {
	dir := os.Getenv(childEnv)
	if dir == "" {
		t.Skip("runs as the child of TestSpoolSurvivesKill")
	}
	mem := newMemStore()
	mem.down.Store(true)
	sp, err := NewSpool(mem, dir, func(c *spoolConfig) { c.manual = true })
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	for i := 0; ; i++ {
		if err := sp.WriteRollups(context.Background(), batchOf(fmt.Sprintf("b%06d", i), 50)); err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		fmt.Printf("ack %d\n", i)
	}
}

// TestSpoolSurvivesKill kills (SIGKILL) a process that is spooling, then
// opens its spool: every batch it acknowledged is replayed whole, and
// nothing half-written is.
func TestSpoolSurvivesKill(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		t.Skip("child")
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestSpoolKillChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), childEnv+"="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	acked := -1
	killed := false
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "error") {
			t.Fatal(line)
		}
		if n, ok := strings.CutPrefix(line, "ack "); ok {
			acked, _ = strconv.Atoi(n)
		}
		if acked >= 150 && !killed {
			cmd.Process.Kill()
			killed = true
		}
	}
	cmd.Wait()
	if !killed {
		t.Fatalf("the child stopped by itself after %d batches", acked+1)
	}

	f := newFixture(t, dir)
	defer f.sp.Close()
	if err := f.sp.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := f.mem.counts()
	for i := 0; i <= acked; i++ {
		if c := got[fmt.Sprintf("b%06d", i)]; c != 50 {
			t.Fatalf("acknowledged batch %d has %d of its 50 rows after the kill", i, c)
		}
	}
	for name, c := range got { // a batch in flight at the kill is whole or absent
		if c != 50 {
			t.Fatalf("batch %s has %d rows", name, c)
		}
	}
	if len(got) > acked+2 {
		t.Fatalf("%d batches replayed, only %d acknowledged", len(got), acked+1)
	}
	t.Logf("%d batches acknowledged before the kill, %d replayed", acked+1, len(got))
	if dropped := f.dropped(DropSpoolCorrupt); dropped != 0 {
		t.Fatalf("%v rows reported corrupt after a kill", dropped)
	}
}
