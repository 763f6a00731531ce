package queue

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// RunScript runs one of the package's scripts with raw arguments, for tests
// that call a script twice as a retried command would.
func RunScript(ctx context.Context, rdb redis.UniversalClient, name string, keys []string, args ...any) (any, error) {
	return script(name).Run(ctx, rdb, keys, args...).Result()
}

// UnpackFields exposes unpackFields: a claim's reply read as the caller
// reads it.
var UnpackFields = unpackFields

// EncodeSpec exposes encodeSpec, for tests that seed job hashes directly.
var EncodeSpec = encodeSpec

// CutoffOf exposes cutoffOf: now as the highest due score.
var CutoffOf = cutoffOf
