package main

import (
	"github.com/qtop-dev/qtop/internal/collector"
	"github.com/qtop-dev/qtop/internal/envoyrls"
	"github.com/qtop-dev/qtop/ru"
)

// newRLS makes Envoy's rate-limit service for --rls-listen. It is wired
// here, not in package collector, so that only this binary links Envoy's
// types (qtop links the collector for its demo). A hit costs the fixed
// cost of a read in model (--otlp-ru-model), or in the default model.
func newRLS(model *ru.Model) func(collector.RLSDeps) (collector.RateLimitService, error) {
	m := ru.DefaultModel()
	if model != nil {
		m = *model
	}
	return func(d collector.RLSDeps) (collector.RateLimitService, error) {
		opts := []envoyrls.Option{envoyrls.WithCost(m.Base[ru.OpRead]), envoyrls.WithClock(d.Now),
			envoyrls.WithRegisterer(d.Registerer), envoyrls.WithLogger(d.Logger)}
		if d.Auth != nil {
			opts = append(opts, envoyrls.WithAuth(d.Auth))
		}
		if d.Admit != nil {
			opts = append(opts, envoyrls.WithAdmission(d.Admit))
		}
		return envoyrls.New(d.Policy, opts...)
	}
}
