package registry

import "github.com/chronoq/chronoq/internal/store"

// ClockOf is the Redis clock a registry's scripts read.
func ClockOf(r *Registry) *store.Clock { return r.eng.Clock() }
