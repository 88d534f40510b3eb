// Package check holds the tests of qtop's deployment files: the Helm chart
// (linted and rendered by Helm's own Go packages, each rendered object
// decoded strictly into the Kubernetes API types) and the systemd unit
// (systemd-analyze verify). It is a module of its own so that Helm's and
// Kubernetes' dependencies stay out of qtop's go.mod.
//
//	cd deploy/check && go test ./...
package check
