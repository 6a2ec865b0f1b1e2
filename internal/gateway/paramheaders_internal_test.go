package gateway

import "testing"

// TestDecimalKey: numbers compare as decimals, exactly, and what is no
// JSON number (or would cost a huge exponent to expand) equals nothing.
func TestDecimalKey(t *testing.T) {
	same := [][2]string{{"42", "42.0"}, {"42", "4.2e1"}, {"42", "420E-1"}, {"0", "-0"}, {"0", "0.000"}, {"1.5", "15e-1"}, {"-7", "-7.00"}, {"1e999", "10e998"}}
	for _, p := range same {
		a, okA := decimalKey(p[0])
		b, okB := decimalKey(p[1])
		if !okA || !okB || a != b {
			t.Errorf("%s and %s: %q %v, %q %v; want one key", p[0], p[1], a, okA, b, okB)
		}
	}
	differ := [][2]string{{"9007199254740993", "9007199254740992"}, {"1", "-1"}, {"0.1", "0.10000000000000001"}}
	for _, p := range differ {
		a, _ := decimalKey(p[0])
		b, _ := decimalKey(p[1])
		if a == b {
			t.Errorf("%s and %s share the key %q", p[0], p[1], a)
		}
	}
	for _, bad := range []string{"", "-", "01", "1.", ".5", "0x2a", "1e", "1e+", "1e9999999999", "NaN", "1,5", " 1"} {
		if k, ok := decimalKey(bad); ok {
			t.Errorf("%q is a number, key %q", bad, k)
		}
	}
}
