//go:build race

package queue_test

// Under the race detector a test binary may hold at most 8,128 goroutines
// alive at once, and each read runs several times slower: the test holds
// fewer waits (make test-load runs it without the detector, with
// 10,000).
const heldWaiters = 4_000
