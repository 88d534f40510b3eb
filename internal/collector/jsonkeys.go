package collector

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
)

// duplicateKey returns the path ("budgets[2].each") of the first key that
// appears twice in one object of body, or "" when none does. encoding/json
// keeps the last of two equal keys without a word, so a rule sent with two
// "tenant" keys would act on the one its reader did not see; the admin
// doors refuse such a body instead, as the OTLP door does. body must
// already have decoded without error (its depth is then bounded).
func duplicateKey(body []byte) string {
	dec := json.NewDecoder(bytes.NewReader(body))
	dup, _ := walkKeys(dec, "")
	return dup
}

// walkKeys reads one value from dec, looking for a repeated key in each
// object it holds.
func walkKeys(dec *json.Decoder, path string) (string, error) {
	t, err := dec.Token()
	if err != nil {
		return "", err
	}
	d, ok := t.(json.Delim)
	if !ok {
		return "", nil
	}
	switch d {
	case '{':
		seen := map[string]struct{}{}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return "", err
			}
			k, _ := kt.(string)
			p := k
			if path != "" {
				p = path + "." + k
			}
			if _, twice := seen[k]; twice {
				return p, nil
			}
			seen[k] = struct{}{}
			if dup, err := walkKeys(dec, p); dup != "" || err != nil {
				return dup, err
			}
		}
	case '[':
		for i := 0; dec.More(); i++ {
			if dup, err := walkKeys(dec, path+"["+strconv.Itoa(i)+"]"); dup != "" || err != nil {
				return dup, err
			}
		}
	}
	_, err = dec.Token() // the closing delimiter
	return "", err
}

// duplicateKeyError is decodeOne's refusal of a repeated key.
func duplicateKeyError(path string) error {
	return fmt.Errorf("key %q appears twice in one object: send each key once", path)
}
