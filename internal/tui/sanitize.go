package tui

import (
	"encoding/json"
	"reflect"
	"strings"
	"time"

	"github.com/qtop-dev/qtop/api"
)

// A snapshot comes from a collector, a recording or a database: from
// anyone. Every view prints its texts through clean, but a field printed
// as it is (a tier, a grouping, an action's unit, a source name) would let
// a hostile collector or a stranger's recording clear the screen, set the
// clipboard (OSC 52) or reorder a line. So a snapshot is made safe once,
// where it enters the UI (and --once): sanitize replaces every character
// that drives a terminal, in every text field, with a space.

// unsafeRune reports whether r drives a terminal rather than prints (what
// api.Printable replaces: controls, C1, bidirectional controls).
func unsafeRune(r rune) bool { return api.Unprintable(r) }

// keepsLines reports whether field f holds a statement's text, whose
// newlines and tabs are kept (a `--` comment ends at its newline: EXPLAIN
// plans the text as it ran); the views fold them when they print it.
func keepsLines(f reflect.StructField) bool { return f.Name == "Query" }

func safeText(s string, lines bool) string {
	bad := func(r rune) bool { return unsafeRune(r) && !(lines && (r == '\n' || r == '\t')) }
	if !strings.ContainsFunc(s, bad) {
		return s
	}
	return strings.Map(func(r rune) rune {
		if bad(r) {
			return ' '
		}
		return r
	}, s)
}

// sanitize returns s with every text field safe to print. A snapshot with
// none to change is returned as it is; else the copy changed shares
// nothing with s (a source may still hold s).
func sanitize(s api.Snapshot) api.Snapshot {
	if !texts(reflect.ValueOf(&s).Elem(), false, false) {
		return s
	}
	b, err := json.Marshal(s)
	var c api.Snapshot
	if err != nil || json.Unmarshal(b, &c) != nil {
		c = s // not expected of a wire type; cleaned in place then
	}
	texts(reflect.ValueOf(&c).Elem(), false, true)
	return c
}

// texts walks v's strings (map keys included); with fix set it makes
// them safe in place. It reports whether one was not.
func texts(v reflect.Value, lines, fix bool) (dirty bool) {
	switch v.Kind() {
	case reflect.String:
		t := safeText(v.String(), lines)
		if t == v.String() {
			return false
		}
		if fix && v.CanSet() {
			v.SetString(t)
		}
		return true
	case reflect.Pointer, reflect.Interface:
		return !v.IsNil() && texts(v.Elem(), lines, fix)
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			return false
		}
		for i := range v.NumField() {
			fv := v.Field(i)
			if k := fv.Kind(); k <= reflect.Complex128 || !fv.CanInterface() {
				continue // a number, or unexported
			}
			lines := fv.Kind() == reflect.String && keepsLines(v.Type().Field(i))
			if texts(fv, lines, fix) {
				dirty = true
			}
		}
	case reflect.Slice, reflect.Array:
		if v.Type().Elem().Kind() <= reflect.Complex128 {
			return false // numbers: nothing to print unsafely
		}
		for i := range v.Len() {
			if texts(v.Index(i), lines, fix) {
				dirty = true
			}
		}
	case reflect.Map:
		return mapTexts(v, fix)
	}
	return dirty
}

// mapTexts is texts of a map: its keys and values.
func mapTexts(v reflect.Value, fix bool) (dirty bool) {
	if v.Len() == 0 {
		return false
	}
	if !fix {
		for it := v.MapRange(); it.Next(); {
			if texts(it.Key(), false, false) || texts(it.Value(), false, false) {
				return true
			}
		}
		return false
	}
	clean := reflect.MakeMapWithSize(v.Type(), v.Len())
	for it := v.MapRange(); it.Next(); {
		k := reflect.New(v.Type().Key()).Elem()
		k.Set(it.Key())
		val := reflect.New(v.Type().Elem()).Elem()
		val.Set(it.Value())
		dk, dv := texts(k, false, fix), texts(val, false, fix)
		if dk || dv {
			dirty = true
		}
		clean.SetMapIndex(k, val)
	}
	if dirty && v.CanSet() {
		v.Set(clean)
	}
	return dirty
}
