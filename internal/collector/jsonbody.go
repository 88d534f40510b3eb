package collector

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
)

// decodeOne decodes body, which must be exactly one JSON object, into v:
// every admin door's body goes through it. It refuses an empty body, a
// body of null, a list, a string, a number or a boolean (encoding/json
// reads null into a struct as its zero value and answers "EOF" for an
// empty body, so a door would silently act on an empty value or answer
// with a word that says nothing), anything after the object, unknown
// fields and a key repeated in one object. example is a short body the
// door takes; a refusal of the body as a whole ends with it. A failed
// decode may leave v partly set.
func decodeOne(body []byte, v any, example string) error {
	if err := checkOne(body, example); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if field, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			return fmt.Errorf("unknown field %s: %s", field, sendOne(example))
		}
		return jsonFieldError(err)
	}
	return nil
}

// checkOne refuses a body that is not exactly one JSON object, or that
// repeats a key in one object; see decodeOne.
func checkOne(body []byte, example string) error {
	want := sendOne(example)
	dec := json.NewDecoder(bytes.NewReader(body))
	switch t, err := dec.Token(); {
	case err == io.EOF:
		return fmt.Errorf("empty body: %s", want)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("the body ends inside a JSON value: %s", want)
	case err != nil:
		return fmt.Errorf("the body is not JSON (%v): %s", err, want)
	case t != json.Delim('{'):
		return fmt.Errorf("the body is %s, not an object: %s", jsonKind(t), want)
	}
	dec = json.NewDecoder(bytes.NewReader(body))
	var raw json.RawMessage
	switch err := dec.Decode(&raw); {
	case errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("the body ends inside its JSON object: %s", want)
	case err != nil:
		return fmt.Errorf("the body is not JSON (%v): %s", err, want)
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("data after the JSON object: %s", want)
	}
	if dup := duplicateKey(body); dup != "" {
		return duplicateKeyError(dup)
	}
	return nil
}

// sendOne is the end of a refusal of a body as a whole.
func sendOne(example string) string { return "send one JSON object, e.g. " + example }

// jsonKind names the JSON value that begins with token t, which is not
// an object.
func jsonKind(t json.Token) string {
	switch t := t.(type) {
	case nil:
		return "null"
	case json.Delim:
		return "a list"
	case string:
		return "a string"
	case bool:
		return fmt.Sprint(t)
	}
	return "a number"
}

// jsonFieldError rewords a value of the wrong type or out of range (a
// number like 1e999, a string for a number) as the field and what it
// wants, without the Go types it was decoded into; other errors are
// returned as they are.
func jsonFieldError(err error) error {
	var te *json.UnmarshalTypeError
	if !errors.As(err, &te) {
		return err
	}
	want := "another type of value"
	switch te.Type.Kind() {
	case reflect.Float32, reflect.Float64:
		want = "a finite number"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		want = "a whole number in range"
	case reflect.String:
		want = "a string"
	case reflect.Bool:
		want = "true or false"
	case reflect.Slice, reflect.Array:
		want = "a list"
	case reflect.Struct, reflect.Map:
		want = "an object"
	}
	field := te.Field
	if field == "" {
		field = "the body"
	} else {
		field = "field " + field
	}
	return fmt.Errorf("%s: %s is not %s", field, clip(te.Value), want)
}
