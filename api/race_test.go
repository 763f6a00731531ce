//go:build race

package api_test

import "time"

// Under the race detector, on two cores, starting 2,000 long polls and
// writing their 2,000 answers at once take several times longer: the
// polls of TestLongPollLoad wait longer, so that all are waiting before
// the first ends, and may answer later (make test-load runs the test
// without the detector, with the strict bound).
const (
	loadWait  = 20 * time.Second
	loadSlack = 10 * time.Second
)
