// Command gateload puts qtop's gate (also as gate-std, with net/http's
// Transport upstream, as gate-stdsrv, with net/http's server in front, and
// as gate-1p, with GOMAXPROCS=1; -gate-std=false, -gate-std-server=false
// and -gate-1p=false leave them out), a bare
// httputil.ReverseProxy and nginx (proxy_pass) in front of the same
// upstream, and two TCP relays with no HTTP in them, the floors of Go's I/O
// (relay-go: a goroutine each way per connection; relay-gnet: gnet's event
// loops; -relays=false leaves them out), one after the other in one run, and drives each (and the upstream directly) at a fixed offered rate
// over keep-alive connections, open loop: every request has its scheduled
// send time, and its latency counts from then, so a proxy that falls behind
// is charged for the queue it causes. It prints, per target, the latency
// percentiles, what each proxy adds over the direct path, and the CPU per
// request of the proxy's processes (from /proc: the gate's, the bare
// proxy's, nginx's master and workers).
//
//	go run ./gateload -rate 5000 -conns 100 -duration 10s
//
// The upstream and the load run inside this process; each proxy is a child
// process. The gate is built from the repository (-repo) unless -gate names
// a binary; nginx is found on PATH or in /usr/sbin unless -nginx names it
// (-nginx none leaves it out).
package main

import (
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"sync"
	"time"
)

type options struct {
	rate, conns       int
	duration, warmup  time.Duration
	repo, gate, nginx string
	runs              int
	profile           string
	gateStd           bool
	gateStdServer     bool
	gateOneProc       bool
	relays            bool
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "bare" {
		os.Exit(bare(os.Args[2:]))
	}
	if len(os.Args) > 1 && os.Args[1] == "relay" {
		os.Exit(relay(os.Args[2:]))
	}
	var o options
	flag.IntVar(&o.rate, "rate", 5000, "offered requests per second")
	flag.IntVar(&o.conns, "conns", 100, "keep-alive connections")
	flag.DurationVar(&o.duration, "duration", 10*time.Second, "measured time per target")
	flag.DurationVar(&o.warmup, "warmup", 2*time.Second, "load before measuring, per target")
	flag.StringVar(&o.repo, "repo", "..", "the qtop repository, to build cmd/gate")
	flag.StringVar(&o.gate, "gate", "", "a gate binary (default: built from -repo)")
	flag.StringVar(&o.nginx, "nginx", "", "the nginx binary (default: nginx on PATH or /usr/sbin/nginx; none: skip)")
	flag.IntVar(&o.runs, "runs", 1, "rounds over all targets")
	flag.BoolVar(&o.gateStd, "gate-std", true, "also load the gate with --std-transport (net/http's Transport upstream) as gate-std")
	flag.BoolVar(&o.gateStdServer, "gate-std-server", true, "also load the gate with --std-server (net/http's server in front) as gate-stdsrv")
	flag.BoolVar(&o.gateOneProc, "gate-1p", true, "also load the gate with GOMAXPROCS=1 (one P: no idle P's thread spinning for work on each wake-up) as gate-1p")
	flag.BoolVar(&o.relays, "relays", true, "also load two TCP relays with no HTTP in them, the floors of Go's I/O: relay-go (a goroutine each way per connection) and relay-gnet (gnet's event loops, nginx's model)")
	flag.StringVar(&o.profile, "gate-pprof", "", "write a 5 s CPU profile of the gate under load to this file")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "gateload:", err)
		os.Exit(1)
	}
}

// bare is the baseline proxy: httputil.ReverseProxy with a transport tuned
// like the gate's, nothing else.
func bare(args []string) int {
	fs := flag.NewFlagSet("bare", flag.ExitOnError)
	listen := fs.String("listen", "127.0.0.1:0", "address")
	upstream := fs.String("upstream", "", "upstream URL")
	fs.Parse(args)
	u, err := url.Parse(*upstream)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	p := &httputil.ReverseProxy{
		Rewrite:   func(pr *httputil.ProxyRequest) { pr.SetURL(u); pr.SetXForwarded() },
		Transport: &http.Transport{MaxIdleConnsPerHost: 256, IdleConnTimeout: 90 * time.Second, DisableCompression: true},
		// The same 32 KiB copy buffers from a pool as the gate's, so
		// that the difference between the two is qtop's path alone.
		BufferPool: bufferPool{},
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	srv := &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second, ErrorLog: nil}
	return exitOf(srv.Serve(ln))
}

type bufferPool struct{}

var buffers = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

func (bufferPool) Get() []byte  { return *buffers.Get().(*[]byte) }
func (bufferPool) Put(b []byte) { buffers.Put(&b) }

func exitOf(err error) int {
	if err != nil && err != http.ErrServerClosed {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}
