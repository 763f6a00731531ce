package registry

// Every Redis key of the registry is built in this file. They are
// namespace-level keys, not a queue's: no script of package queue touches
// them. All carry the hash tag {<ns>:workers}, so they sit in one Redis
// Cluster slot and each script declares all of them:
//
//   - <ns>:{<ns>:workers}:info    HASH worker id -> its registration, JSON
//     {"host","labels","queues","version"} as Register wrote it (absent for
//     a worker known only from its claims)
//   - <ns>:{<ns>:workers}:state   HASH worker id -> "<started ms> <last seen
//     ms> <ttl ms>" (Redis's clock)
//   - <ns>:{<ns>:workers}:queues  HASH worker id -> " q1 q2 ": the queues it
//     claimed from over HTTP
//   - <ns>:{<ns>:workers}:held    HASH worker id -> " q/id q/id ": the jobs it
//     holds (queue names and job ids hold neither spaces nor slashes)
//   - <ns>:{<ns>:workers}:expiry  ZSET worker id -> the ms (Redis's clock) it
//     expires at: its last sighting plus its TTL
//   - <ns>:{<ns>:workers}:ids     ZSET worker id, score 0: the ids in byte
//     order, for paging
//
// Once a worker has registered, every key exists and stays: each holds a
// sentinel, the byte 0x01, which no worker id can be (a field with an
// empty value in the hashes, a member scored +inf in expiry, 0 in ids),
// as each key of a queue does (see internal/store/layout.go). During a migration
// of the slot Redis answers TRYAGAIN to a script whose keys the node has
// in part, for as long as the migration lasts; with all of them present,
// the scripts run until the slot moves (then ASK or MOVED, which the
// client follows). The scripts skip the sentinel.
//
// The namespace is validated by the queue client (no braces) before any
// key is built.

// keys are the registry's keys of one namespace, in the order the
// scripts take them (store.Registry*, internal/store/ops.go).
type keys struct {
	info, state, queues, held, expiry, ids string
}

func keysOf(ns string) keys {
	p := ns + ":{" + ns + ":workers}:"
	return keys{info: p + "info", state: p + "state", queues: p + "queues", held: p + "held",
		expiry: p + "expiry", ids: p + "ids"}
}

// all lists the keys in the order of the scripts' KEYS.
func (k keys) all() []string {
	return []string{k.info, k.state, k.queues, k.held, k.expiry, k.ids}
}

// Keys lists the registry's keys of namespace ns, for tools that look at
// Redis directly (the chaos battery tells them from keys nobody owns).
func Keys(ns string) []string { return keysOf(ns).all() }
