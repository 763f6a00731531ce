package redisproc

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// doTimeout bounds one Do: dial, write and reply.
const doTimeout = 2 * time.Second

// Do sends one command to addr on a connection of its own and answers the
// reply in RESP2 form (string, int64, []any; an error reply is an error, a
// nil reply is nil). No pool, no retries, no cluster redirects: a probe or
// an injected fault must reach exactly the node named, once.
func Do(addr string, args ...string) (any, error) {
	rdb := redis.NewClient(&redis.Options{
		Addr: addr, Protocol: 2, DisableIdentity: true, MaxRetries: -1, PoolSize: 1,
		DialTimeout: doTimeout, ReadTimeout: doTimeout, WriteTimeout: doTimeout,
	})
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), doTimeout)
	defer cancel()
	cmd := make([]any, len(args))
	for i, a := range args {
		cmd[i] = a
	}
	v, err := rdb.Do(ctx, cmd...).Result()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	return v, err
}

// AsString is v if it is a string, else "".
func AsString(v any) string {
	s, _ := v.(string)
	return s
}

// InfoField reads "name:value" from an INFO or CLUSTER INFO reply.
func InfoField(info, name string) string {
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
