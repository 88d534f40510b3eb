package main

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// target is what the load goes to: the upstream itself or a proxy.
type target struct {
	name string
	addr string
	cmd  *exec.Cmd // nil for the upstream
}

func run(o options) error {
	tmp, err := os.MkdirTemp("", "gateload-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	up, err := startUpstream()
	if err != nil {
		return err
	}
	upURL := "http://" + up
	gateBin, err := buildGate(o, tmp)
	if err != nil {
		return err
	}
	nginxBin := findNginx(o.nginx)
	for round := 1; round <= o.runs; round++ {
		fmt.Printf("\nround %d: %d req/s offered over %d connections, %v measured after %v warm-up, GOMAXPROCS of each Go proxy = %d cores\n",
			round, o.rate, o.conns, o.duration, o.warmup, numCPU())
		targets := []target{{name: "direct", addr: up}}
		mks := []func() (target, error){
			func() (target, error) { return startBare(upURL) },
			func() (target, error) { return startGate(gateBin, upURL, tmp, "gate") },
		}
		if o.gateStd {
			mks = append(mks, func() (target, error) { return startGate(gateBin, upURL, tmp, "gate-std", "--std-transport") })
		}
		if o.gateStdServer {
			mks = append(mks, func() (target, error) { return startGate(gateBin, upURL, tmp, "gate-stdsrv", "--std-server") })
		}
		if o.gateOneProc {
			mks = append(mks, func() (target, error) { return startGate(gateBin, upURL, tmp, "gate-1p", "GOMAXPROCS=1") })
		}
		if o.relays {
			mks = append(mks, func() (target, error) { return startRelay("go", up, false) },
				func() (target, error) { return startRelay("gnet", up, false) })
			if o.gateOneProc {
				mks = append(mks, func() (target, error) { return startRelay("go", up, true) })
			}
		}
		mks = append(mks, func() (target, error) { return startNginx(nginxBin, up, tmp) })
		for _, mk := range mks {
			t, err := mk()
			if err != nil {
				return err
			}
			if t.name != "" {
				targets = append(targets, t)
			}
		}
		if err := measureAll(o, targets); err != nil {
			return err
		}
	}
	return nil
}

// measureAll loads each target in turn and prints the table.
func measureAll(o options, targets []target) error {
	rows := make([]row, len(targets))
	defer func() {
		for _, t := range targets {
			if t.cmd != nil {
				t.cmd.Process.Signal(os.Interrupt)
				t.cmd.Wait()
			}
		}
	}()
	for i, t := range targets {
		if _, err := drive(t.addr, o.rate, o.conns, o.warmup); err != nil {
			return fmt.Errorf("%s: %w", t.name, err)
		}
		if t.name == "gate" && o.profile != "" {
			go profileGate(o.profile)
		}
		before := cpuTicks(t.cmd)
		r, err := drive(t.addr, o.rate, o.conns, o.duration)
		if err != nil {
			return fmt.Errorf("%s: %w", t.name, err)
		}
		rows[i] = row{name: t.name, r: r, ticks: cpuTicks(t.cmd).sub(before), proxy: t.cmd != nil}
	}
	printTable(rows)
	return nil
}

func startUpstream() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	body := []byte(strings.Repeat("x", 256))
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(body)
	}), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	return ln.Addr().String(), nil
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

func startChild(name string, addr string, cmd *exec.Cmd) (target, error) {
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		return target{}, fmt.Errorf("%s: %w", name, err)
	}
	if err := waitListening(addr); err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		return target{}, fmt.Errorf("%s: %w", name, err)
	}
	return target{name: name, addr: addr, cmd: cmd}, nil
}

// startSelf runs this program's subcommand sub as the target name,
// listening on an address of its own, with env added to its environment.
func startSelf(name string, env []string, sub string, args ...string) (target, error) {
	addr, err := freeAddr()
	if err != nil {
		return target{}, err
	}
	self, err := os.Executable()
	if err != nil {
		return target{}, err
	}
	cmd := exec.Command(self, append([]string{sub, "-listen", addr}, args...)...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	return startChild(name, addr, cmd)
}

func startBare(up string) (target, error) { return startSelf("httputil", nil, "bare", "-upstream", up) }

// startRelay runs a relay floor (relay.go) as relay-MODE, with
// GOMAXPROCS=1 as relay-MODE-1p if oneP.
func startRelay(mode, up string, oneP bool) (target, error) {
	if oneP {
		return startSelf("relay-"+mode+"-1p", []string{"GOMAXPROCS=1"}, "relay", "-mode", mode, "-upstream", up)
	}
	return startSelf("relay-"+mode, nil, "relay", "-mode", mode, "-upstream", up)
}

func buildGate(o options, tmp string) (string, error) {
	if o.gate != "" {
		return o.gate, nil
	}
	bin := filepath.Join(tmp, "gate")
	out, err := exec.Command("go", "build", "-C", o.repo, "-o", bin, "./cmd/gate").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build cmd/gate: %v\n%s", err, out)
	}
	return bin, nil
}

// gatePprof is where the gate serves its profiles during the run.
var gatePprof string

// startGate runs the gate binary as name with extra flags; the one named
// "gate" serves profiles.
func startGate(bin, up, tmp, name string, extra ...string) (target, error) {
	addr, err := freeAddr()
	if err != nil {
		return target{}, err
	}
	pprofAddr, err := freeAddr()
	if err != nil {
		return target{}, err
	}
	if name == "gate" {
		gatePprof = pprofAddr
	}
	plans := filepath.Join(tmp, "plans.json")
	// One tenant with a limit far above the offered load: the bucket is
	// charged on every request but never refuses.
	err = os.WriteFile(plans, []byte(`{"plans": {"bench": {"limit": {"ru_per_second": 1e9, "burst": 1e9}, "weight": 1}}, "default": "bench"}`), 0o600)
	if err != nil {
		return target{}, err
	}
	args := []string{"--listen", addr, "--upstream", up, "--service", "bench",
		"--tenant", "header", "--plans", plans, "--log-level", "warn", "--pprof", pprofAddr}
	var env []string // NAME=value in extra goes to the environment
	for _, e := range extra {
		if strings.HasPrefix(e, "-") {
			args = append(args, e)
		} else {
			env = append(env, e)
		}
	}
	cmd := exec.Command(bin, args...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	return startChild(name, addr, cmd)
}

func findNginx(flagged string) string {
	switch flagged {
	case "none":
		return ""
	case "":
		if p, err := exec.LookPath("nginx"); err == nil {
			return p
		}
		if _, err := os.Stat("/usr/sbin/nginx"); err == nil {
			return "/usr/sbin/nginx"
		}
		fmt.Fprintln(os.Stderr, "gateload: no nginx (apt-get install nginx): left out")
		return ""
	}
	return flagged
}

// startNginx runs nginx in the foreground with a configuration of its own
// in tmp: proxy_pass to the upstream over keep-alive connections, access
// log off, one worker per core.
func startNginx(bin, up, tmp string) (target, error) {
	if bin == "" {
		return target{}, nil
	}
	addr, err := freeAddr()
	if err != nil {
		return target{}, err
	}
	dir := filepath.Join(tmp, "nginx")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return target{}, err
	}
	conf := fmt.Sprintf(`daemon off;
master_process on;
worker_processes auto;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path %[1]s/body; proxy_temp_path %[1]s/proxy;
  fastcgi_temp_path %[1]s/fastcgi; uwsgi_temp_path %[1]s/uwsgi; scgi_temp_path %[1]s/scgi;
  upstream up { server %[2]s; keepalive 256; }
  server {
    listen %[3]s;
    location / {
      proxy_pass http://up;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
      proxy_set_header X-Forwarded-Proto $scheme;
      proxy_set_header X-Forwarded-Host $host;
    }
  }
}
`, dir, up, addr)
	path := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		return target{}, err
	}
	return startChild("nginx", addr, exec.Command(bin, "-p", dir, "-c", path, "-e", filepath.Join(dir, "error.log")))
}

// ticks is CPU time in clock ticks: user and system (the kernel's work
// for the process: its syscalls, and on loopback the receiving side of
// what it sends).
type ticks struct{ user, sys int64 }

func (t ticks) sub(u ticks) ticks { return ticks{t.user - u.user, t.sys - u.sys} }

// cpuTicks is the CPU of the process and its children processes
// (nginx's workers); 0 for no process.
func cpuTicks(cmd *exec.Cmd) ticks {
	if cmd == nil {
		return ticks{}
	}
	pid := cmd.Process.Pid
	_, total := procStat(pid)
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil || p == pid {
			continue
		}
		if ppid, t := procStat(p); ppid == pid {
			total.user += t.user
			total.sys += t.sys
		}
	}
	return total
}

// procStat reads a process's parent, utime and stime from /proc/PID/stat.
func procStat(pid int) (ppid int, t ticks) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, t
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, t
	}
	f := strings.Fields(s[i+1:])
	// After the command: state(0) ppid(1) … utime(11) stime(12).
	if len(f) < 13 {
		return 0, t
	}
	ppid, _ = strconv.Atoi(f[1])
	t.user, _ = strconv.ParseInt(f[11], 10, 64)
	t.sys, _ = strconv.ParseInt(f[12], 10, 64)
	return ppid, t
}

// profileGate writes a CPU profile of the gate under load.
func profileGate(path string) {
	resp, err := http.Get("http://" + gatePprof + "/debug/pprof/profile?seconds=5")
	if err != nil {
		fmt.Fprintln(os.Stderr, "gateload: profile:", err)
		return
	}
	defer resp.Body.Close()
	f, err := os.Create(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gateload: profile:", err)
		return
	}
	defer f.Close()
	f.ReadFrom(resp.Body)
}
