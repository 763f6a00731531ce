package wire

import (
	"encoding/json"
	"math"
	"testing"
)

// FuzzAppendString holds the hand-written JSON string escaping to
// encoding/json's, byte for byte.
func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "plain", `q"b\s`, "\x00\x01\x1f\x7f", "<a&b>", "\u2028\u2029", "é日本", "\xff\xfe", "a\xc3", "\t\n\r"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := AppendString(nil, s); string(got) != string(want) {
			t.Fatalf("AppendString(%q) = %s, want %s", s, got, want)
		}
	})
}

func TestAppendFloat(t *testing.T) {
	for _, f := range []float64{0, 1, 2, 0.2, 1.5, 100, 1e-7, 1e21, 123456789.125, math.SmallestNonzeroFloat64, -0.5} {
		want, err := json.Marshal(f)
		if err != nil {
			t.Fatal(err)
		}
		if got := AppendFloat(nil, f); string(got) != string(want) {
			t.Errorf("AppendFloat(%v) = %s, want %s", f, got, want)
		}
	}
}
