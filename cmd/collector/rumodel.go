package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"

	"github.com/qtop-dev/qtop/ru"
)

// loadRUModel reads the RU cost model of --otlp-ru-model: the JSON
// `rucalib -json` prints (an ru.Model). An empty path means the default
// model (nil).
func loadRUModel(path string) (*ru.Model, error) {
	if path == "" {
		return nil, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--otlp-ru-model: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var m ru.Model
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("--otlp-ru-model %s: not a cost model as rucalib -json prints it: %w", path, err)
	}
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("--otlp-ru-model %s: %w", path, err)
	}
	return &m, nil
}
