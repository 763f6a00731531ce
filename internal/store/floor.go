package store

import (
	"math"
	"sync"
	"time"
)

// Floor is a lower bound of one Redis server's clock, from readings of it
// (Redis's now, as a script answered it): a reading R answered at T on
// the client's clock means that at any later X Redis's clock reads at
// least R + (X − T)·(1 − floorDrift), the two clocks' rates being within
// floorDrift of each other (NTP slews a clock by at most 500 ppm). Of its
// readings it keeps the one that bounds highest, the answer that came
// back quickest, for floorFresh: after that any reading replaces it, so
// that a Redis that changed (a failover to a node with a clock of its
// own) bounds within a second. A job claimed ahead of its due time starts
// where the bound reaches that time (package queue's claims ahead):
// never before it by Redis's clock, whatever the offset between the
// clocks, as the bound is measured on the client's monotonic clock from
// readings of Redis's own. Clock is the estimate; Floor the guarantee.
// Safe for concurrent use; its zero value has no reading yet.
type Floor struct {
	mu  sync.Mutex
	r   int64     // Redis's µs read
	t   time.Time // when it was read, on the client's clock (its answer's arrival)
	set bool
}

// floorDrift is the most the rates of the client's clock and Redis's may
// differ by (1,000 ppm, twice NTP's largest slew), as a fraction.
const floorDrift = 0.001

// floorFresh is how long a Floor keeps a reading against the later ones
// that bound Redis's clock lower.
const floorFresh = time.Second

// Observe takes a reading: Redis's now rUs, answered at t.
func (f *Floor) Observe(rUs int64, t time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	age := t.Sub(f.t)
	if !f.set || age > floorFresh || float64(rUs) > float64(f.r)+float64(age.Microseconds())*(1-floorDrift) {
		f.r, f.t, f.set = rUs, t, true
	}
}

// Reaches answers the instant of the client's clock from which Redis's
// clock reads at least dueUs, by the bound.
func (f *Floor) Reaches(dueUs int64) time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	wait := math.Ceil(float64(dueUs-f.r) / (1 - floorDrift))
	return f.t.Add(time.Duration(wait) * time.Microsecond)
}
