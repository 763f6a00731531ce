// Package batch is chronoq's group commit: calls that go to Redis at the
// same time for the same key (a queue) share one script call, each with
// its own answer.
//
// A script call has a fixed cost (the round trip, reading the request and
// writing the reply, the script's own set-up) several times what one more
// item in the same call costs. Several paths send one item a call, at
// rates where that cost adds up: the Go client's single enqueues (package
// queue), the HTTP server's single enqueues, claims and completes (package
// api), the Go worker's completes and failures (package worker) and the push
// dispatcher's attempt notes (package dispatch). They all batch through a
// [Batcher], so that batching has one meaning and one set of limits.
//
// # What a call does
//
// [Batcher.Do] hands one item of a key to the batcher and waits for its
// answer. Per key, nothing waits on purpose: a call that finds its key
// idle is sent at once, by a sender goroutine the call starts; calls that
// arrive while a batch of that key is in flight wait, and go together in
// the next one, in the order they arrived. The sender sends the key's
// batches one after the other until none waits, so a key has one call in
// flight at a time.
//
// Before it takes each batch, that goroutine yields its processor once
// (runtime.Gosched). The callers the batch before it just answered are
// runnable then, and a producer that sends one item after another comes
// back with its next item within the yield and joins this batch rather
// than the next. Without it, N such producers split into two batches
// that take turns, those in flight and those that came back meanwhile. A
// yield is not a wait: with nothing else runnable it returns at once.
//
// # Answers and contexts
//
// Each caller gets exactly its own answer: the [Send] function answers
// each item, and an error of the call as a whole is every item's. A
// panic in Send is every item's too, as a [*PanicError].
//
// A batch's call runs under a context of its own, never a caller's, bounded
// by [CallTimeout]: one caller giving up must not fail the others. A
// caller whose context ends while its item waits leaves the batch (the
// item is never sent) and gets its context's error. Once its item is sent,
// the caller returns its context's error at once while the batch goes on,
// as a single call cut short would: the item may or may not have been
// written.
//
// # Limits
//
// A batch holds at most [MaxItems] items and [MaxBytes] bytes, as
// [Config.Items] and [Config.Size] count them; at most [MaxWaiting] calls
// wait per key; [CallTimeout] bounds a batch's call. They are constants,
// the same for every user.
package batch
