package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// result is one measured load.
type result struct {
	sent, ok, failed int64
	hist             *hdrhistogram.Histogram // µs, from the scheduled send
	elapsed          time.Duration
}

// drive offers rate requests per second to addr over conns keep-alive
// connections for d, open loop, and measures each from its scheduled time.
func drive(addr string, rate, conns int, d time.Duration) (result, error) {
	n := int(float64(rate) * d.Seconds())
	tokens := make(chan int64, n)
	req := []byte("GET /item/42 HTTP/1.1\r\nHost: " + addr + "\r\nX-Tenant: acme\r\nX-Tier: T1\r\nUser-Agent: gateload\r\n\r\n")
	hists := make([]*hdrhistogram.Histogram, conns)
	var ok, failed atomic.Int64
	var wg sync.WaitGroup
	cs := make([]net.Conn, conns)
	for i := range conns {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			for _, c := range cs[:i] {
				c.Close()
			}
			return result{}, err
		}
		cs[i] = c
	}
	for i := range conns {
		hists[i] = hdrhistogram.New(1, 60_000_000, 3)
		wg.Add(1)
		go func() {
			defer wg.Done()
			worker(cs[i], req, tokens, hists[i], &ok, &failed)
		}()
	}
	start := time.Now()
	interval := time.Second / time.Duration(rate)
	tick := time.NewTicker(time.Millisecond)
	for i := 0; i < n; {
		now := time.Now()
		for ; i < n; i++ {
			at := start.Add(time.Duration(i) * interval)
			if at.After(now) {
				break
			}
			tokens <- at.UnixNano()
		}
		if i < n {
			<-tick.C
		}
	}
	tick.Stop()
	close(tokens)
	wg.Wait()
	r := result{sent: int64(n), ok: ok.Load(), failed: failed.Load(), hist: hdrhistogram.New(1, 60_000_000, 3), elapsed: time.Since(start)}
	for _, h := range hists {
		r.hist.Merge(h)
	}
	return r, nil
}

// worker sends one request per token on its connection and reads the
// answer.
func worker(c net.Conn, req []byte, tokens <-chan int64, h *hdrhistogram.Histogram, ok, failed *atomic.Int64) {
	defer c.Close()
	br := bufio.NewReaderSize(c, 4096)
	for at := range tokens {
		if _, err := c.Write(req); err != nil {
			failed.Add(1)
			drain(tokens, failed)
			return
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			failed.Add(1)
			drain(tokens, failed)
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		h.RecordValue(max(time.Now().UnixNano()-at, 1000) / 1000)
		if resp.StatusCode == http.StatusOK {
			ok.Add(1)
		} else {
			failed.Add(1)
		}
	}
}

func drain(tokens <-chan int64, failed *atomic.Int64) {
	for range tokens {
		failed.Add(1)
	}
}

// waitListening dials addr until it answers, for up to 10 s.
func waitListening(addr string) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not start listening: %w", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
