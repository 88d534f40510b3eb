package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLoadRUModel(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if m, err := loadRUModel(""); m != nil || err != nil {
		t.Fatalf("empty path: %v, %v", m, err)
	}
	m, err := loadRUModel(write("ok.json", `{"base":[1,5,5,2],"per_kib":0.25,"per_ms":0.05}`))
	if err != nil || m.Base[1] != 5 || m.PerKiB != 0.25 || m.PerMs != 0.05 {
		t.Fatalf("model %+v, %v", m, err)
	}
	for name, body := range map[string]string{
		"neg.json":     `{"base":[1,5,5,2],"per_kib":-1,"per_ms":0.05}`,
		"unknown.json": `{"base":[1,5,5,2],"per_kb":1}`,
		"junk.json":    `not json`,
	} {
		if _, err := loadRUModel(write(name, body)); err == nil || !strings.Contains(err.Error(), "--otlp-ru-model") {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := loadRUModel(filepath.Join(dir, "missing.json")); err == nil {
		t.Error("a missing file was accepted")
	}
}
