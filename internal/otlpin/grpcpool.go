package otlpin

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

// connMeter is a gRPC connection the receiver meters (GRPCListener): what
// it delivered and how many of its streams wait for their message (the
// rate watch), and the memory reserved for those messages as their bytes
// arrive — its pool.
//
// gRPC reads a stream's message into buffers of its own as the frames
// arrive and hands it over whole, so what a connection's waiting streams
// hold is what it delivered for them. The pool follows that: each stream
// the tap admits adds grpcStep (the bytes read before the tap saw its
// headers); the DATA payload every read brings while streams wait counts
// against it (h2Scan), and before gRPC has the bytes the pool grows to
// twice what they sent (their buffers, then the copy decoded), doubling, at most twice the message limit per
// waiting stream. When a message is in, twice its size moves from the pool
// to its stream, which holds it until it is answered (what the pool lacks
// of it, a message gzip expanded, comes from the budget, or the message is
// answered busy); when no stream waits, what is left goes back. A read
// whose growth finds the budget taken, after waiting up to reserveWait,
// cuts the connection's waiting streams and gives their pool back, so the
// connection keeps serving, and clients that send headers and nothing
// else hold a step each, not the budget. A cut stream is answered
// CANCELLED (gRPC writes its context's end before the handler can answer
// otherwise; OTLP exporters retry it) and counted busy.
type connMeter struct {
	read    atomic.Int64
	waiting atomic.Int64
	flooded atomic.Bool // closed for a flood of stream resets (flood)

	r   *Receiver
	key string // the connection's peer address: its share of the budget

	mu      sync.Mutex
	pending map[*tappedStream]context.CancelCauseFunc // streams waiting for their message → their cut
	fill    int64                                     // bytes read while streams waited, not yet a message's
	held    int64                                     // the pool, reserved in r.mem under key
}

// errResetFlood ends a connection that resets streams as a flood does
// (h2Scan.flooded).
var errResetFlood = errors.New("otlpin: the client resets most of the streams it opens (an HTTP/2 rapid-reset flood): connection closed")

// flood counts a connection closed for a flood of stream resets, once,
// and returns the error its Read ends with.
func (m *connMeter) flood() error {
	if m.flooded.CompareAndSwap(false, true) {
		m.r.met.resetFloods.Inc()
		m.r.cfg.log.Warn("otlp: gRPC connection closed: it resets most of the streams it opens", "peer", m.key)
	}
	return errResetFlood
}

func newConnMeter(r *Receiver, key string) *connMeter {
	return &connMeter{r: r, key: key, pending: make(map[*tappedStream]context.CancelCauseFunc)}
}

// errPoolCut is the cause of a waiting stream cut because its connection's
// bytes found the memory budget taken.
var errPoolCut = fmt.Errorf("%w: the memory for messages being received is taken (its bytes arrived as it filled); send it again later", ErrBusy)

// open adds st, just admitted with step bytes reserved under m.key, to the
// streams waiting for their message; cut ends it.
func (m *connMeter) open(st *tappedStream, step int64, cut context.CancelCauseFunc) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pending[st] = cut
	m.held += step
}

// delivered counts n message bytes the connection delivered: the rate
// watch's progress, and the pool's growth.
func (m *connMeter) delivered(n int64) {
	m.read.Add(n)
	m.grow(n)
}

// grow counts n bytes read while streams wait and grows the pool to twice
// what they sent before gRPC has them (see connMeter).
func (m *connMeter) grow(n int64) {
	if n <= 0 {
		return
	}
	m.mu.Lock()
	if len(m.pending) == 0 {
		m.mu.Unlock()
		return
	}
	m.fill += n
	need := 2 * m.fill
	target := min(max(need, 2*m.held), int64(len(m.pending))*grpcReserve(m.r.cfg.grpcMax))
	if need <= m.held || target <= m.held {
		// Enough, or at the most the waiting messages may hold: gRPC's
		// message limit bounds the rest (DATA of streams already
		// ended counts here too: h2Scan).
		m.mu.Unlock()
		return
	}
	delta := target - m.held
	m.mu.Unlock()
	// Only the connection's reader grows its pool, so waiting here holds
	// up nobody else.
	err := m.r.mem.takeWait(context.Background(), m.key, delta, reserveWait)
	m.mu.Lock()
	if err != nil {
		cuts := make([]context.CancelCauseFunc, 0, len(m.pending))
		for st, cut := range m.pending {
			cuts = append(cuts, cut)
			delete(m.pending, st)
		}
		m.closeLocked()
		m.mu.Unlock()
		for _, cut := range cuts {
			cut(errPoolCut)
		}
		showMemory(m.r)
		return
	}
	m.held += delta
	if len(m.pending) == 0 { // every waiting stream ended meanwhile
		m.closeLocked()
	}
	m.mu.Unlock()
	showMemory(m.r)
}

// settle takes st, whose message of size bytes is in, out of the waiting
// streams, and returns what it now holds of the pool: twice its size, or
// what the pool has.
func (m *connMeter) settle(st *tappedStream, size int64) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.pending[st]; !ok {
		return 0
	}
	delete(m.pending, st)
	m.fill = max(0, m.fill-size)
	own := min(2*size, m.held)
	m.held -= own
	if len(m.pending) == 0 {
		m.closeLocked()
	}
	return own
}

// drop takes st out of the waiting streams if it is there (its stream
// ended before its message was in).
func (m *connMeter) drop(st *tappedStream) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.pending[st]; !ok {
		return
	}
	delete(m.pending, st)
	if len(m.pending) == 0 {
		m.closeLocked()
	}
}

// closeLocked gives the pool back (no stream waits; m.mu held).
func (m *connMeter) closeLocked() {
	if m.held > 0 {
		m.r.mem.give(m.key, m.held)
	}
	m.held, m.fill = 0, 0
}

// showMemory sets the memory gauge to what is reserved.
func showMemory(r *Receiver) { r.met.memory.Set(float64(r.mem.reserved())) }
