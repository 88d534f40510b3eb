package collector

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// FuzzDecodeOne: decodeOne takes exactly the bodies that are one JSON
// object, and a refusal never answers a bare "EOF".
func FuzzDecodeOne(f *testing.F) {
	for _, s := range []string{"", " ", "null", "[]", `"x"`, "42", "true", "{}", `{"a":1}`, `{"a":1,"a":2}`,
		`{} x`, `{}{}`, `{"a":`, `"a`, `{"b":["x"]}`, `{"a":"x"}`, `{"c":1}`, "\ufeff{}"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var v struct {
			A int      `json:"a"`
			B []string `json:"b"`
		}
		err := decodeOne(body, &v, `{"a":1}`)
		trimmed := bytes.TrimLeft(body, " \t\r\n")
		isObject := len(trimmed) > 0 && trimmed[0] == '{' && json.Valid(body)
		if err == nil && !isObject {
			t.Fatalf("decodeOne(%q) took a body that is not one object", body)
		}
		if err == nil {
			return
		}
		if strings.Contains(err.Error(), "EOF") {
			t.Fatalf("decodeOne(%q): %v", body, err)
		}
		if !isObject && !strings.Contains(err.Error(), `send one JSON object, e.g. {"a":1}`) {
			t.Fatalf("decodeOne(%q): %v does not say what to send", body, err)
		}
	})
}
