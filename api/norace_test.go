//go:build !race

package api_test

import "time"

// loadWait is how long the polls of TestLongPollLoad wait, and loadSlack
// how much later than that each may answer.
const (
	loadWait  = 8 * time.Second
	loadSlack = time.Second
)
