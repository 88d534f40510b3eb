package collector

import "testing"

// TestDuplicateKey: a key repeated in one object is found at any depth,
// with its path; equal keys in different objects, and keys that differ
// only in case (two tenants of a map), are not repeats.
func TestDuplicateKey(t *testing.T) {
	for body, want := range map[string]string{
		`{"a":1,"b":2}`:             "",
		`{"a":1,"a":2}`:             "a",
		`{"a":{"x":1},"b":{"x":1}}`: "",
		`{"budgets":[{"each":"tenant"},{"each":"t","each":"u"}]}`: "budgets[1].each",
		`{"m":[{"k":"v"},{"k":"v","k":"w"}]}`:                     "m[1].k",
		`{"t":{"Acme":1,"acme":2}}`:                               "",
		`[{"a":1},{"a":1}]`:                                       "",
		`{"a":[[],[{}],{"z":{"q":1,"q":1}}]}`:                     "a[2].z.q",
		`"x"`:                                                     "",
	} {
		if got := duplicateKey([]byte(body)); got != want {
			t.Errorf("duplicateKey(%s) = %q, want %q", body, got, want)
		}
	}
}
