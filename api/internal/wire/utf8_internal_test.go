package wire

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestStrictRefusesInvalidUTF8: a body that is not valid UTF-8 is refused
// whatever holds the bad byte, naming that member and the byte's offset;
// escapes that decode to valid text are fine.
func TestStrictRefusesInvalidUTF8(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, body, field string
		offset            int
	}{
		{"payload string", "{\"kind\":\"k\",\"payload\":\"\xff\"}", "payload", 23},
		{"payload member", "{\"kind\":\"k\",\"payload\":{\"to\":\"a\xc3\"}}", "payload.to", 30},
		{"a job of a batch", "{\"jobs\":[{\"kind\":\"a\"},{\"kind\":\"b\",\"payload\":[\"\xed\xa0\x80\"]}]}", "jobs[1].payload[0]", 46},
		{"a member name", "{\"kind\":\"k\",\"\xfe\":1}", "", 13},
		{"a log line", "{\"token\":\"t\",\"lines\":[\"ok\",\"bad \xff\"]}", "lines[1]", 32},
		{"outside a string", "{\"kind\":\"k\"}\xff", "", 12},
		{"malformed before it", "{\"kind\" \"k\",\"payload\":\"\xff\"}", "", 23},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var v struct {
				Kind    string
				Payload []byte
			}
			err := Strict([]byte(tt.body), &v, "")
			var we *Error
			require.ErrorAs(t, err, &we)
			require.False(t, we.TooLarge)
			require.Equal(t, tt.field, we.Field)
			require.Contains(t, we.Message, "not valid UTF-8")
			require.Contains(t, we.Message, "offset "+strconv.Itoa(tt.offset))
		})
	}
	var v struct {
		Payload string `json:"payload"`
	}
	require.NoError(t, Strict([]byte(`{"payload":"\u00e9 é \ud83d\ude00"}`), &v, ""))
	require.Equal(t, "é é 😀", v.Payload)
}
