package api_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/chronoq/chronoq/testutil"
)

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

func TestMain(m *testing.M) {
	// go-redis logs every failed dial; the outage test makes many on purpose.
	redis.SetLogger(quietLogger{})
	testutil.Main(m)
}
