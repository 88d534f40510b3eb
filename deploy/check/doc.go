// Package check holds the tests of qtop's deployment files: the Helm chart
// (linted and rendered by Helm's own Go packages, each rendered object
// decoded strictly into the Kubernetes API types), the gate's sidecar
// example (decoded the same way, its ports and probes checked against
// each other), the systemd units (systemd-analyze verify; the variables
// their env files name checked against each command's --help) and the
// release archive. It is a module of its own so that Helm's and
// Kubernetes' dependencies stay out of qtop's go.mod.
//
//	cd deploy/check && go test ./...
package check
