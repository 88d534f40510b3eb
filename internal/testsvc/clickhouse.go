package testsvc

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// PrivateClickHouse is a ClickHouse server of the test's own: its own data
// folder and ports, so a test may stop and restart it (an outage) without
// disturbing the shared server that other packages' tests use at the same
// time. It runs the same clickhouse-server binary that scripts/services
// installs.
type PrivateClickHouse struct {
	t      testing.TB
	dir    string
	port   int
	asUser string
}

// StartPrivateClickHouse starts a private server and stops it when the test
// ends. A missing clickhouse-server fails the test where services are
// required and skips it elsewhere.
func StartPrivateClickHouse(t testing.TB) *PrivateClickHouse {
	t.Helper()
	if _, err := exec.LookPath("clickhouse-server"); err != nil {
		if Required() {
			t.Fatalf("clickhouse-server is not installed; %s", hint)
		}
		t.Skipf("clickhouse-server is not installed; %s", hint)
	}
	dir, err := os.MkdirTemp("", "qtop-ch-*")
	if err != nil {
		t.Fatal(err)
	}
	p := &PrivateClickHouse{t: t, dir: dir, port: freePort(t)}
	httpPort := freePort(t)
	if os.Geteuid() == 0 {
		// The server keeps its files as the clickhouse user, as the
		// packaged one does.
		if u, err := user.Lookup("clickhouse"); err == nil {
			p.asUser = "clickhouse"
			uid, _ := strconv.Atoi(u.Uid)
			gid, _ := strconv.Atoi(u.Gid)
			if err := os.Chown(dir, uid, gid); err != nil {
				t.Fatal(err)
			}
		}
	}
	config := fmt.Sprintf(`<?xml version="1.0"?>
<yandex>
  <logger><level>warning</level><log>%[1]s/server.log</log><errorlog>%[1]s/server.err.log</errorlog><size>10M</size><count>1</count></logger>
  <tcp_port>%[2]d</tcp_port>
  <http_port>%[3]d</http_port>
  <listen_host>127.0.0.1</listen_host>
  <path>%[1]s/data/</path>
  <tmp_path>%[1]s/tmp/</tmp_path>
  <user_files_path>%[1]s/user_files/</user_files_path>
  <users_config>/etc/clickhouse-server/users.xml</users_config>
  <default_profile>default</default_profile>
  <default_database>default</default_database>
  <mark_cache_size>536870912</mark_cache_size>
</yandex>
`, dir, p.port, httpPort)
	if err := os.WriteFile(filepath.Join(dir, "config.xml"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Stop()
		os.RemoveAll(dir)
	})
	p.Start()
	return p
}

// Addr is host:port of the private server's native protocol.
func (p *PrivateClickHouse) Addr() string { return "127.0.0.1:" + strconv.Itoa(p.port) }

// Start starts the server (again) and waits until it answers; a failure
// ends the test.
func (p *PrivateClickHouse) Start() {
	p.t.Helper()
	if err := p.Restart(); err != nil {
		p.t.Fatal(err)
	}
}

// Restart starts the server (again) and waits until it answers. Unlike
// Start it may be called from any goroutine: it returns its failure.
func (p *PrivateClickHouse) Restart() error {
	if p.ready() {
		return nil
	}
	args := []string{"--config-file=" + filepath.Join(p.dir, "config.xml"), "--pid-file=" + p.pidFile(), "--daemon"}
	var cmd *exec.Cmd
	if p.asUser != "" {
		cmd = exec.Command("su", p.asUser, "-s", "/bin/sh", "-c", "cd "+p.dir+" && exec clickhouse-server "+strings.Join(args, " "))
	} else {
		cmd = exec.Command("clickhouse-server", args...)
		cmd.Dir = p.dir
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("start private clickhouse-server: %v\n%s", err, out)
	}
	deadline := time.Now().Add(60 * time.Second)
	for !p.ready() {
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(p.dir, "server.err.log"))
			return fmt.Errorf("private ClickHouse on %s did not answer within 60 s; its log:\n%s", p.Addr(), log)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return nil
}

// Stop stops the server and waits until it has exited. Stopping a stopped
// server does nothing.
func (p *PrivateClickHouse) Stop() {
	b, err := os.ReadFile(p.pidFile())
	if err != nil {
		return
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return
	}
	_ = syscall.Kill(pid, syscall.SIGTERM)
	deadline := time.Now().Add(30 * time.Second)
	for syscall.Kill(pid, 0) == nil {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(50 * time.Millisecond)
	}
	os.Remove(p.pidFile())
}

func (p *PrivateClickHouse) pidFile() string { return filepath.Join(p.dir, "server.pid") }

func (p *PrivateClickHouse) ready() bool {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "clickhouse-client", "--host", "127.0.0.1", "--port", strconv.Itoa(p.port), "-q", "SELECT 1").Output()
	return err == nil && strings.TrimSpace(string(out)) == "1"
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
