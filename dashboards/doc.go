// Package dashboards ships qtop's Grafana dashboards, Prometheus recording
// and alert rules (with their promtool unit tests) and the runbook the
// alerts point to, and holds the checks that keep them true to the code.
//
// The files are plain JSON, YAML and Markdown, importable as they are (see
// README.md); [FS] embeds them so that a program can serve or provision
// them. [Parse] scans a PromQL expression for the metric and label names
// it reads, which is how the tests prove that every metric a dashboard or
// rule reads is one the code registers, and that per-tenant queries read
// only the top-N + "other" series exported through package topn: a metric
// renamed in code fails a test here instead of leaving a blank panel.
package dashboards
