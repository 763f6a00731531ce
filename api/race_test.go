//go:build race

package api_test

import "time"

// Under the race detector, on two cores, starting 2,000 long polls and
// writing their 2,000 answers at once take several times longer: the
// polls of TestLongPollLoad wait longer, so that all are waiting before
// the first ends, and may answer later (make test-load runs the test
// without the detector, with the strict bound). Measured on a shared
// two-core machine: every poll waiting after 4 to 5 s, answers up to
// 10 s after the wait.
const (
	loadWait  = 20 * time.Second
	loadSlack = 20 * time.Second
)
