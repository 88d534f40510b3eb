package otlpin

import (
	"context"
	"fmt"
	"time"
)

// Decode admission, the same for HTTP and gRPC. A request whose body is
// in (its memory reserved in the budget before it was read) takes a
// decode slot: at most WithInflight decodes run at once, and a request
// that finds them taken waits up to slotWait for one before it is answered
// busy — a decode of an SDK's batch (100 to 512 spans) takes well under a
// millisecond, so ten exporters sending at once are all served, in turn.
//
// A large message (WithLargeMessage: at least 4 MiB decoded by default,
// far above any SDK batch) also takes the one large slot, waiting for it
// up to largeWait, first come first served: so at most one large decode
// runs at a time, whatever the number of clients, and the other cores stay
// with everything else (the report door, SDK-sized exports). After each,
// the large slot rests as long as the decode took, so large decodes take
// at most half a core on average. Its memory was reserved before it was
// read, so the wait costs no more memory.

// reserveWait is how long a request (HTTP) or stream (gRPC) waits for
// memory to be given back before it is answered busy: as long as the
// report door waits for a decode slot.
const reserveWait = 250 * time.Millisecond

// slotWait is how long a request waits for a decode slot before it is
// answered busy: as long as the report door waits for one.
const slotWait = 250 * time.Millisecond

// largeWait is how long a large message waits for the large slot: a few
// decodes of the largest message (about 150 ms of CPU each), then it is
// answered busy and its memory given back.
const largeWait = 2 * time.Second

// acquire takes a decode slot for a message of size bytes (and the large
// slot when it is large), waiting as the doc above says (or until ctx
// ends); otherwise it says why not (ErrBusy, ErrShutdown) and when to try
// again. release gives back what it took.
func (r *Receiver) acquire(ctx context.Context, size int64) (release func(), retry time.Duration, err error) {
	r.mu.Lock()
	closed, busy := r.closed, r.backlog >= maxBacklog
	r.mu.Unlock()
	switch {
	case closed:
		return nil, retryLater, ErrShutdown
	case busy:
		return nil, retryLater, fmt.Errorf("%w: the collector is refusing reports", ErrBusy)
	}
	large := size >= r.cfg.largeMsg
	if large {
		if !take(ctx, r.large, largeWait) {
			return nil, retrySlots, fmt.Errorf("%w: a message of %d bytes waits for the one decode of messages above %d bytes; send smaller batches", ErrBusy, size, r.cfg.largeMsg)
		}
	}
	if !take(ctx, r.sem, slotWait) {
		if large {
			<-r.large
		}
		return nil, retrySlots, fmt.Errorf("%w: %d requests being decoded", ErrBusy, cap(r.sem))
	}
	if !large {
		return func() { <-r.sem }, 0, nil
	}
	start := time.Now()
	return func() {
		<-r.sem
		// The large slot rests as long as the decode took before the next
		// large message may start: large decodes take at most half a core.
		time.AfterFunc(time.Since(start), func() { <-r.large })
	}, 0, nil
}

// take puts a token in slots, waiting up to wait (or until ctx ends).
func take(ctx context.Context, slots chan struct{}, wait time.Duration) bool {
	select {
	case slots <- struct{}{}:
		return true
	default:
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case slots <- struct{}{}:
		return true
	case <-t.C:
		return false
	case <-ctx.Done():
		return false
	}
}
