package chaos

import (
	"github.com/redis/go-redis/v9"
)

// Target is the queue's Redis as a process sees it: one server (possibly
// through a proxy) or a cluster's seeds.
type Target struct {
	Addr    string   `json:"addr,omitempty"`
	Cluster []string `json:"cluster,omitempty"`
}

// Client opens a go-redis client with its default options (retries,
// timeouts): the engine is tested as users run it.
func (t Target) Client() redis.UniversalClient {
	if len(t.Cluster) > 0 {
		return redis.NewClusterClient(&redis.ClusterOptions{Addrs: t.Cluster})
	}
	return redis.NewClient(&redis.Options{Addr: t.Addr})
}
