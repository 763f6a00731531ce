//go:build !race

package queue_test

// heldWaiters is how many waits TestWaitEndedHoldsTenThousandWaiters holds
// on one client.
const heldWaiters = 10_000
