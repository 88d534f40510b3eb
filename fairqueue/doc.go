// Package fairqueue holds background work per tenant and hands it out by
// weighted deficit round-robin, so a tenant that enqueues 2,000 jobs does
// not make a small tenant wait behind all of them. It bounds starvation,
// caps each tenant's work in flight, and makes a producer wait (rather
// than fail) once its tenant has too much queued.
//
// Make a [Queue] with [New], giving weights and caps per tenant (usually
// from the tenant's plan: [WithWeights], [WithConcurrency]). Producers
// call [Queue.PushAt] (or [Queue.Push]); workers call [Queue.PopWait]
// and [Queue.Done] when the item's work ends; [Queue.Close] stops
// producers and lets workers drain.
package fairqueue
