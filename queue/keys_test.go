package queue

import (
	"github.com/chronoq/chronoq/internal/names"
	"github.com/chronoq/chronoq/internal/store"
	"math/rand/v2"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// Every per-queue key holds the queue's hash tag exactly once, and it is the
// first brace pair, so Redis Cluster puts the queue in one slot.
func TestQueueKeysCarryHashTag(t *testing.T) {
	t.Parallel()
	for _, q := range []string{"default", "a", "emails.v2", "x-y_z", "0"} {
		k := store.QueueKeys("chronoq", q)
		v := reflect.ValueOf(k)
		var all []string
		for i := range v.NumField() {
			if v.Type().Field(i).Name != "Name" {
				all = append(all, v.Field(i).String())
			}
		}
		require.Equal(t, q, k.Name)
		require.Len(t, k.All(), len(all)-1, "all() lists every key (the events channel is no key)")
		tag := "{" + q + "}"
		for _, key := range all {
			require.Equal(t, 1, strings.Count(key, tag), key)
			require.True(t, strings.HasPrefix(key, "chronoq:"+tag+":"), key)
			require.Equal(t, strings.Index(key, "{"), len("chronoq:"), "the queue's tag is the first brace pair: %s", key)
		}
	}
}

func TestValidateQueue(t *testing.T) {
	t.Parallel()
	for _, q := range []string{"default", "a", "0-9._x", strings.Repeat("a", 64)} {
		require.NoError(t, names.ValidateQueue(q), q)
	}
	for _, q := range []string{"", "A", "-a", ".a", "a{b}", "a}", "a b", "a:b", strings.Repeat("a", 65), "é"} {
		err := names.ValidateQueue(q)
		require.ErrorIs(t, err, ErrInvalid, q)
		require.ErrorIs(t, err, ErrInvalidQueue, q)
	}
}

func TestValidateKindAndID(t *testing.T) {
	t.Parallel()
	require.NoError(t, names.ValidateKind("email:send.v2"))
	require.ErrorIs(t, names.ValidateKind(""), ErrInvalidKind)
	require.ErrorIs(t, names.ValidateKind("a|b"), ErrInvalidKind) // '|' separates event fields
	require.ErrorIs(t, names.ValidateKind(strings.Repeat("k", 129)), ErrInvalidKind)
	require.NoError(t, names.ValidateID("0192f3c4a1b27c9e8d1f0a3b4c5d6e7f"))
	require.ErrorIs(t, names.ValidateID("a:b"), ErrInvalidID)
	require.ErrorIs(t, names.ValidateID(""), ErrInvalidID)
}

func TestNamespaceRejectsBraces(t *testing.T) {
	t.Parallel()
	require.NoError(t, names.ValidateNamespace("chronoq"))
	require.Error(t, names.ValidateNamespace("a{b}"))
	require.Error(t, names.ValidateNamespace(""))
}

// The byte-loop validators accept exactly what the documented patterns do.
func TestValidatorsMatchTheirPatterns(t *testing.T) {
	t.Parallel()
	patterns := []struct {
		re    *regexp.Regexp
		valid func(string) bool
	}{
		{regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`), func(s string) bool { return names.ValidateQueue(s) == nil }},
		{regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`), func(s string) bool { return names.ValidateKind(s) == nil }},
		{regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`), func(s string) bool { return names.ValidateID(s) == nil }},
		{regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9:_-]{0,63}$`), func(s string) bool { return names.ValidateNamespace(s) == nil }},
	}
	const alphabet = "aZ09._:-{} /é\x00"
	rng := rand.New(rand.NewPCG(7, 8))
	for range 20_000 {
		b := make([]byte, rng.IntN(140))
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		if rng.IntN(2) == 0 && len(b) > 0 { // mostly valid characters too
			for i := range b {
				b[i] = "az09AZ._-:"[rng.IntN(10)]
			}
		}
		s := string(b)
		for _, p := range patterns {
			require.Equal(t, p.re.MatchString(s), p.valid(s), "%q against %s", s, p.re)
		}
	}
}

// Validate answers what Enqueue would, without Redis (the client here
// points at no server).
func TestValidateNeedsNoRedis(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer func() { _ = rdb.Close() }()
	c, err := NewClient(Config{Redis: rdb, MaxPayloadBytes: 10})
	require.NoError(t, err)
	defer func() { _ = c.Close() }()
	require.NoError(t, c.Validate(NewJob{Kind: "k", Payload: []byte(`{"a":1}`)}))
	err = c.Validate(NewJob{Kind: "k", Payload: []byte(`{"a":"0123456789"}`)})
	require.ErrorIs(t, err, ErrPayloadTooLarge)
	var fe *FieldError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, "payload", fe.Field)
	require.ErrorIs(t, c.Validate(NewJob{Kind: "bad kind"}), ErrInvalidKind)
}
