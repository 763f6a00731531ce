package dispatch

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/internal/store"
)

// hook_claim.lua's rows are read through the engine's typed readers: a
// reply of another shape is an error naming the element, never a
// delivery with an empty key, attempt or body.
func TestTakenDeliveriesReadTheirRows(t *testing.T) {
	t.Parallel()
	got, err := takenDeliveries([]any{"emails/1-0", int64(1), `{"a":1}`, "emails/2-0", int64(3), `{"b":2}`})
	require.NoError(t, err)
	require.Equal(t, []takenDelivery{{key: "emails/1-0", attempts: 1, body: `{"a":1}`}, {key: "emails/2-0", attempts: 3, body: `{"b":2}`}}, got)

	for name, rows := range map[string][]any{
		"a value short":     {"emails/1-0", int64(1)},
		"attempts a string": {"emails/1-0", "1", `{}`},
		"key an integer":    {int64(7), int64(1), `{}`},
		"body missing":      {"emails/1-0", int64(1), nil},
	} {
		_, err := takenDeliveries(rows)
		var re *store.ReplyError
		require.ErrorAs(t, err, &re, name)
		require.Equal(t, "hook_claim", re.Script, name)
	}
}
