package dashboards

import "embed"

// Paths inside FS.
const (
	// GrafanaDir holds one dashboard per JSON file.
	GrafanaDir = "grafana"
	// RulesFile holds the recording and alert rules.
	RulesFile = "rules/qtop.rules.yml"
	// RulesTestFile holds the promtool unit tests of RulesFile.
	RulesTestFile = "rules/qtop.rules.test.yml"
	// Runbook has one section per alert.
	Runbook = "RUNBOOK.md"
)

// FS holds the dashboards, the rules with their tests, the runbook and
// the README.
//
//go:embed grafana/*.json rules/*.yml RUNBOOK.md README.md
var FS embed.FS
