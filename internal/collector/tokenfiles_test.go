package collector

import (
	"context"
	"errors"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// writeToken puts tok in path as an operator rotating it does: a new file
// renamed into place, with mode.
func writeToken(t *testing.T, path, tok string, mode os.FileMode) {
	t.Helper()
	tmp := path + ".new"
	if err := os.WriteFile(tmp, []byte(tok), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(tmp, mode); err != nil { // whatever the umask
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// authorizes reports whether token passes for role.
func authorizes(s *Server, role Role, token string) bool {
	req := httptest.NewRequest("GET", "/", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	_, err := s.Authorize(req, role)
	return err == nil
}

// TestTokenFilesReload: a token file that changes is read again at the
// next tick; from then on its new token passes and the old one does not
// (no grace period). A file that is empty, gone or too large keeps the
// token in force and is logged once, not at every tick. The generated
// admin-token is watched too, and the peer token sent to peers follows its
// file. Each step is one explicit Tick on the fake clock.
func TestTokenFilesReload(t *testing.T) {
	dir := t.TempDir()
	rep, read, peer := filepath.Join(dir, "report.token"), filepath.Join(dir, "read.token"), filepath.Join(dir, "peer.token")
	writeToken(t, rep, "rep-1\n", 0o600)
	writeToken(t, read, "read-1\n", 0o600)
	writeToken(t, peer, "peer-1\n", 0o600)
	var logs lockedBuffer
	f := newFixture(t, func(c *Config) {
		c.TokenFiles = TokenFiles{Token: rep, ReadToken: read, PeerToken: peer}
		c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	defer f.stop()
	tick := func() { f.s.Tick(context.Background(), f.clk.Add(time.Second)) }
	reloads := func(token, result string) float64 {
		return testutil.ToFloat64(f.s.tokens.reloads.WithLabelValues(token, result))
	}
	admin1 := f.token

	// t0: the tokens of the files at start.
	for _, c := range []struct {
		role Role
		tok  string
	}{{RoleReport, "rep-1"}, {RoleRead, "read-1"}, {RoleRead, "peer-1"}, {RoleAdmin, admin1}} {
		if !authorizes(f.s, c.role, c.tok) {
			t.Fatalf("t0: %s token %q refused", c.role, c.tok)
		}
	}
	if got := f.s.tokens.peerToken(); got != "peer-1" {
		t.Fatalf("t0: peer token sent %q", got)
	}

	// t1: the read token rotated; nothing changes until the tick reads it.
	writeToken(t, read, "read-2\n", 0o600)
	if !authorizes(f.s, RoleRead, "read-1") || authorizes(f.s, RoleRead, "read-2") {
		t.Fatal("t1: the file was read before the tick")
	}
	tick()
	if authorizes(f.s, RoleRead, "read-1") || !authorizes(f.s, RoleRead, "read-2") {
		t.Fatal("t1: after the tick, want the new read token only")
	}
	if reloads("read", reloadChanged) != 1 || logs.count(`msg="token file changed`) != 1 {
		t.Fatalf("t1: reloads %v, logs:\n%s", reloads("read", reloadChanged), logs.b.String())
	}

	// t2: an unchanged file is not counted again.
	tick()
	if reloads("read", reloadChanged) != 1 {
		t.Fatalf("t2: an unchanged file counted as a reload")
	}

	// t3, t4: emptied (a rotation half done), then the next tick: the token
	// in force stays, one error logged, one refusal counted.
	writeToken(t, read, " \n", 0o600)
	tick()
	tick()
	if !authorizes(f.s, RoleRead, "read-2") {
		t.Fatal("t3: an empty file took the read token away")
	}
	if n := logs.count(`token file not read again`); n != 1 || reloads("read", reloadRefused) != 1 {
		t.Fatalf("t4: %d errors logged, %v refusals counted, want 1 and 1:\n%s", n, reloads("read", reloadRefused), logs.b.String())
	}
	if !strings.Contains(logs.b.String(), "is empty") || strings.Contains(logs.b.String(), "read-2") {
		t.Fatalf("t4: the error does not say why, or names the token:\n%s", logs.b.String())
	}

	// t5: gone; t6: too large. Each a new error, the token still in force.
	if err := os.Remove(read); err != nil {
		t.Fatal(err)
	}
	tick()
	writeToken(t, read, strings.Repeat("x", maxTokenFile+1), 0o600)
	tick()
	if !authorizes(f.s, RoleRead, "read-2") || logs.count(`token file not read again`) != 3 {
		t.Fatalf("t6: want read-2 in force and 3 errors logged:\n%s", logs.b.String())
	}

	// t7: a good file again.
	writeToken(t, read, "read-3", 0o600)
	tick()
	if authorizes(f.s, RoleRead, "read-2") || !authorizes(f.s, RoleRead, "read-3") {
		t.Fatal("t7: want read-3 only")
	}

	// t8: the report, peer and generated admin tokens rotated at once.
	writeToken(t, rep, "rep-2", 0o600)
	writeToken(t, peer, "peer-2", 0o600)
	writeToken(t, filepath.Join(f.dir, adminTokenFile), "admin-2\n", 0o600)
	tick()
	for _, c := range []struct {
		role     Role
		tok      string
		accepted bool
	}{
		{RoleReport, "rep-1", false}, {RoleReport, "rep-2", true},
		{RoleRead, "peer-1", false}, {RoleRead, "peer-2", true},
		{RoleAdmin, admin1, false}, {RoleAdmin, "admin-2", true},
	} {
		if got := authorizes(f.s, c.role, c.tok); got != c.accepted {
			t.Errorf("t8: %s token %q accepted %v, want %v", c.role, c.tok, got, c.accepted)
		}
	}
	if f.s.Token() != "admin-2" || f.s.tokens.peerToken() != "peer-2" {
		t.Fatalf("t8: Token() %q, peer token sent %q", f.s.Token(), f.s.tokens.peerToken())
	}
	if strings.Contains(logs.b.String(), "rep-2") || strings.Contains(logs.b.String(), "admin-2") {
		t.Fatalf("a token is in the log:\n%s", logs.b.String())
	}
}

// TestTokenFileModeWarning: a token file that others may read, or its
// group write, is warned of at start — the file, its mode and the fix —
// and the collector starts; a 0600 file is not, nor a 0440 one (a
// Kubernetes secret volume with an fsGroup). A file whose mode opens later is warned of
// when the tick reads it.
func TestTokenFileModeWarning(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no Unix modes")
	}
	dir := t.TempDir()
	open, closed, group := filepath.Join(dir, "open.token"), filepath.Join(dir, "closed.token"), filepath.Join(dir, "group.token")
	writeToken(t, open, "rep", 0o644)
	writeToken(t, closed, "read", 0o600)
	writeToken(t, group, "peer", 0o440)
	data := t.TempDir()
	writeToken(t, filepath.Join(data, adminTokenFile), "adm\n", 0o660) // kept from an earlier run, too open
	var logs lockedBuffer
	f := &fixture{t: t, clk: &clock{t: t0}, mem: newMemStore(), dir: data}
	f.start(func(c *Config) {
		c.TokenFiles = TokenFiles{Token: open, ReadToken: closed, PeerToken: group}
		c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	defer f.stop()
	out := logs.b.String()
	for _, want := range []string{"level=WARN", "file=" + open, "mode=0644", `fix="chmod 600 ` + open + `"`,
		"file=" + filepath.Join(data, adminTokenFile), "mode=0660"} {
		if !strings.Contains(out, want) {
			t.Errorf("the start's log lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, closed) || strings.Contains(out, group) {
		t.Errorf("a 0600 or 0440 file was warned of:\n%s", out)
	}
	if err := os.Chmod(closed, 0o604); err != nil {
		t.Fatal(err)
	}
	f.s.Tick(context.Background(), f.clk.Add(time.Second))
	if !strings.Contains(logs.b.String(), `fix="chmod 600 `+closed+`"`) {
		t.Errorf("a mode opened later was not warned of:\n%s", logs.b.String())
	}
	if !authorizes(f.s, RoleReport, "rep") || !authorizes(f.s, RoleRead, "read") || f.s.Token() != "adm" {
		t.Error("a token of an open file was not taken")
	}
}

// TestAdminTokenFileMode: the admin token the collector makes is in a
// 0600 file even when an empty admin-token with another mode was there
// (os.WriteFile would have kept that mode: a world-readable admin token).
func TestAdminTokenFileMode(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no Unix modes")
	}
	data := t.TempDir()
	p := filepath.Join(data, adminTokenFile)
	writeToken(t, p, "", 0o644)
	f := &fixture{t: t, clk: &clock{t: t0}, mem: newMemStore(), dir: data}
	f.start()
	defer f.stop()
	st, err := os.Stat(p)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("admin-token: %v %v, want mode 0600", st.Mode(), err)
	}
	if b, _ := os.ReadFile(p); strings.TrimSpace(string(b)) != f.token || f.token == "" {
		t.Fatalf("admin-token holds %q, the server takes %q", b, f.token)
	}
	entries, _ := os.ReadDir(data)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			t.Errorf("left behind: %s", e.Name())
		}
	}
}

// TestTokenFilesAtStart: a token file that cannot give a token, or a token
// given both ways, stops New with ErrConfig naming the flag.
func TestTokenFilesAtStart(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	writeToken(t, empty, "\n", 0o600)
	good := filepath.Join(dir, "good")
	writeToken(t, good, "tok", 0o600)
	twoLines := filepath.Join(dir, "two-lines")
	writeToken(t, twoLines, "a\nb\n", 0o600)
	for _, c := range []struct {
		mutate func(*Config)
		want   string
	}{
		{func(c *Config) { c.TokenFiles.Token = filepath.Join(dir, "missing") }, "--token-file"},
		{func(c *Config) { c.TokenFiles.ReadToken = empty }, "is empty"},
		{func(c *Config) { c.TokenFiles.ReadToken = twoLines }, "one token, on one line"},
		{func(c *Config) { c.TokenFiles.AdminToken, c.AdminToken = good, "x" }, "--admin-token and as --admin-token-file"},
	} {
		cfg := Config{Store: StoreNone, DataDir: t.TempDir()}
		c.mutate(&cfg)
		s, err := New(cfg)
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("New: %v, want ErrConfig saying %q", err, c.want)
		}
		if s != nil {
			s.Shutdown(context.Background())
		}
	}
}
