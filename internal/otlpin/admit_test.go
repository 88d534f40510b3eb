package otlpin

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"
	"google.golang.org/protobuf/encoding/protowire"
)

// A request that finds every decode slot taken waits up to slotWait for
// one: served when one comes back in time, answered busy (503,
// Retry-After) when none does — the same for HTTP and gRPC (acquire).
func TestDecodeSlotWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &sink{}
		r, err := New(s, WithInflight(1), WithInterval(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		defer r.Shutdown(context.Background())
		body := marshal(t, request("svc", server(1, "acme", "/a", time.Millisecond)))
		r.sem <- struct{}{} // the one slot, taken
		codes := make(chan int, 1)
		go func() { codes <- post(t, r, ContentTypeProtobuf, "", body).Code }()
		synctest.Wait() // waiting for the slot
		time.Sleep(slotWait - time.Millisecond)
		<-r.sem // given back just in time
		if c := <-codes; c != http.StatusOK {
			t.Fatalf("slot given back within the wait: %d", c)
		}
		r.sem <- struct{}{}
		start := time.Now()
		w := post(t, r, ContentTypeProtobuf, "", body)
		if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") != "1" || time.Since(start) != slotWait {
			t.Fatalf("no slot within the wait: %d after %v, Retry-After %q", w.Code, time.Since(start), w.Header().Get("Retry-After"))
		}
		<-r.sem
	})
}

// Large messages are decoded one at a time, first come first served, and
// the large slot rests as long as a decode took; smaller ones pass beside
// them; a large one that waits longer than largeWait is answered busy.
// Step table on the bubble's fake clock (t0 = the start).
func TestLargeMessagesOneAtATime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, err := New(&sink{}, WithLargeMessage(1000), WithInterval(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		defer r.Shutdown(context.Background())
		t0 := time.Now()
		var mu sync.Mutex
		var log []string
		note := func(format string, a ...any) {
			mu.Lock()
			log = append(log, fmt.Sprintf("%v ", time.Since(t0))+fmt.Sprintf(format, a...))
			mu.Unlock()
		}
		// decode takes a slot for a message of size bytes at +at, holds it
		// for took, then gives it back.
		decode := func(name string, size int64, at, took time.Duration) {
			time.Sleep(at)
			done, _, err := r.acquire(t.Context(), size)
			if err != nil {
				note("%s busy", name)
				return
			}
			note("%s starts", name)
			time.Sleep(took)
			done()
		}
		var wg sync.WaitGroup
		for _, d := range []struct {
			name     string
			size     int64
			at, took time.Duration
		}{
			{"L1", 1000, 0, 300 * time.Millisecond},                     // runs 0–300 ms; the slot rests until 600 ms
			{"L2", 5000, 10 * time.Millisecond, 100 * time.Millisecond}, // waits for L1 and its rest: 600–700 ms, rests until 800 ms
			{"s", 999, 20 * time.Millisecond, time.Millisecond},         // small: passes beside L1
			{"L3", 1000, 30 * time.Millisecond, 0},                      // waits for L2 and its rest: 800 ms, no rest
			{"L4", 1000, 40 * time.Millisecond, time.Second},            // next in line: 800–1800 ms, rests until 2800 ms
			{"L5", 2000, 50 * time.Millisecond, 0},                      // would start at 2800 ms: busy after largeWait, at 2050 ms
		} {
			wg.Go(func() { decode(d.name, d.size, d.at, d.took) })
		}
		wg.Wait()
		got := strings.Join(log, "\n")
		want := strings.Join([]string{
			"0s L1 starts",
			"20ms s starts",
			"600ms L2 starts",
			"800ms L3 starts",
			"800ms L4 starts",
			"2.05s L5 busy",
		}, "\n")
		if got != want {
			t.Fatalf("got\n%s\nwant\n%s", got, want)
		}
	})
}

// A gRPC stream waits for memory only when its connection holds none (the
// wait runs on the connection's reader); beside another stream of its
// connection it is answered busy at once.
func TestGRPCTapWaitsOnlyAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const dec = 1 << 20
		r, err := New(&sink{}, WithMaxBody(dec/2, dec/2), WithMemory(2*dec)) // a stream reserves dec
		if err != nil {
			t.Fatal(err)
		}
		defer r.Shutdown(context.Background())
		info := &tap.Info{FullMethodName: exportMethod}
		admit := func(conn string) (time.Duration, error) {
			ctx, cancel := tapCtx(conn)
			t.Cleanup(cancel)
			start := time.Now()
			_, err := r.tapGRPC(ctx, info)
			return time.Since(start), err
		}
		if _, err := admit("a"); err != nil {
			t.Fatal(err)
		}
		if _, err := admit("bb"); err != nil {
			t.Fatal(err)
		}
		if waited, err := admit("a"); status.Code(err) != codes.Unavailable || waited != 0 {
			t.Fatalf("beside another stream of its connection: %v after %v, want busy at once", err, waited)
		}
		if waited, err := admit("ccc"); status.Code(err) != codes.Unavailable || waited != reserveWait {
			t.Fatalf("alone on its connection: %v after %v, want busy after %v", err, waited, reserveWait)
		}
	})
}

// A request of more than MaxSpans spans is refused from its framing, its
// spans counted before any is mapped; nothing of it is recorded.
func TestTooManySpansRefusedFromFraming(t *testing.T) {
	clk := &fakeClock{now: t0}
	s := &sink{}
	r := newTestReceiver(t, s, clk, WithLargeMessage(1))
	var ss []byte
	ss = protowire.AppendBytes(protowire.AppendTag(ss, fSSSpans, protowire.BytesType), marshal(t, server(1, "acme", "/a", time.Millisecond).proto()))
	for range MaxSpans {
		ss = protowire.AppendBytes(protowire.AppendTag(ss, fSSSpans, protowire.BytesType), nil)
	}
	rs := protowire.AppendBytes(protowire.AppendTag(nil, fRSScopeSpans, protowire.BytesType), ss)
	body := protowire.AppendBytes(protowire.AppendTag(nil, fReqResourceSpans, protowire.BytesType), rs)
	_, err := r.Consume(body)
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), fmt.Sprintf("%d spans in one request", MaxSpans+1)) {
		t.Fatalf("got %v", err)
	}
	r.Flush(clk.now)
	if len(s.rows()) != 0 {
		t.Fatalf("recorded %v", keysOf(s.rows()))
	}
}
