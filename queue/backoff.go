package queue

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Backoff is an exponential retry policy: the n-th failed attempt (n >= 1)
// waits Initial·Factor^(n-1), capped at Max, then spread by ±Jitter of itself
// (and capped at Max again). With Jitter 0.2 a 10 s delay becomes a delay in
// [8 s, 12 s].
//
// The policy is stored with every job (in its spec field), and the fail
// script computes the formula inside Redis from it, so a retry is one
// atomic step; the tests hold the script to a Go reference of the
// formula (the contract test BackoffMatchesPolicyWithinBounds).
type Backoff struct {
	// Initial is the delay after the first failed attempt. Defaults to 1 s.
	Initial time.Duration
	// Factor multiplies the delay for each further attempt. Defaults to 2.
	Factor float64
	// Max caps the delay. Defaults to 1 h.
	Max time.Duration
	// Jitter is the fraction (0 to 1) by which a delay is spread at random
	// to keep retries of many jobs from arriving together. Defaults to 0.2
	// through [DefaultBackoff]; a Backoff built by hand with Jitter 0 has none.
	Jitter float64
}

// DefaultBackoff is the policy of a job that names none, unless
// Config.DefaultBackoff says otherwise.
var DefaultBackoff = Backoff{Initial: time.Second, Factor: 2, Max: time.Hour, Jitter: 0.2}

// Limits of a backoff policy.
const (
	MaxBackoffDelay  = 30 * 24 * time.Hour // the longest Initial or Max accepted
	MaxBackoffFactor = 100
)

// ErrInvalidBackoff is wrapped by every error of [Backoff.Validate].
var ErrInvalidBackoff = errors.New("invalid backoff")

// Validate reports the first field of b that is out of range.
func (b Backoff) Validate() error {
	switch {
	case b.Initial <= 0 || b.Initial > MaxBackoffDelay:
		return fmt.Errorf("%w: initial must be in (0, %s], got %s", ErrInvalidBackoff, MaxBackoffDelay, b.Initial)
	case math.IsNaN(b.Factor) || b.Factor < 1 || b.Factor > MaxBackoffFactor:
		return fmt.Errorf("%w: factor must be in [1, %d], got %v", ErrInvalidBackoff, MaxBackoffFactor, b.Factor)
	case b.Max < b.Initial || b.Max > MaxBackoffDelay:
		return fmt.Errorf("%w: max must be in [initial, %s], got %s", ErrInvalidBackoff, MaxBackoffDelay, b.Max)
	case math.IsNaN(b.Jitter) || b.Jitter < 0 || b.Jitter > 1:
		return fmt.Errorf("%w: jitter must be in [0, 1], got %v", ErrInvalidBackoff, b.Jitter)
	}
	return nil
}

// encode is the compact form stored in a job's hash and read by the Lua
// scripts: "initial_ms:factor:max_ms:jitter", the numbers in decimals
// (never "1e-05": some Lua engines, the embedded Redis's, read exponents
// as nil).
func (b Backoff) encode() string {
	return strconv.FormatInt(b.Initial.Milliseconds(), 10) + ":" + strconv.FormatFloat(b.Factor, 'f', -1, 64) + ":" +
		strconv.FormatInt(b.Max.Milliseconds(), 10) + ":" + strconv.FormatFloat(b.Jitter, 'f', -1, 64)
}

// decodeBackoff parses the form written by [Backoff.encode]. (It runs for
// every job read, so it splits by hand rather than with fmt.Sscanf.)
func decodeBackoff(s string) (Backoff, error) {
	bad := func() (Backoff, error) {
		return Backoff{}, fmt.Errorf("%w: cannot decode %q: want initial_ms:factor:max_ms:jitter", ErrInvalidBackoff, s)
	}
	parts := strings.Split(s, ":")
	if len(parts) != 4 {
		return bad()
	}
	ini, err1 := strconv.ParseInt(parts[0], 10, 64)
	factor, err2 := strconv.ParseFloat(parts[1], 64)
	mx, err3 := strconv.ParseInt(parts[2], 10, 64)
	jitter, err4 := strconv.ParseFloat(parts[3], 64)
	if err1 != nil || err2 != nil || err3 != nil || err4 != nil {
		return bad()
	}
	return Backoff{Initial: time.Duration(ini) * time.Millisecond, Factor: factor,
		Max: time.Duration(mx) * time.Millisecond, Jitter: jitter}, nil
}
