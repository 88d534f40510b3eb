// Package buildinfo says which build of qtop is running: the version the
// release script stamps into every binary (-ldflags -X), else the module
// version and VCS revision Go records, for `--version` and the
// qtop_build_info metric.
//
//	go build -ldflags "-X github.com/qtop-dev/qtop/internal/buildinfo.version=v1.2.3" ./cmd/collector
package buildinfo

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
)

// version is set by the release script (scripts/release) with -ldflags -X.
var version string

// Info is what a binary knows of its build.
type Info struct {
	// Version is the release (v1.2.3), the module version of a `go
	// install`ed binary, or "devel".
	Version string
	// Revision is the VCS commit the binary was built from, with
	// "-dirty" when the tree had changes; "unknown" without VCS data.
	Revision string
	// GoVersion is the Go toolchain that built it.
	GoVersion string
	// Tags are the build tags that change what the binary can do
	// (noduckdb).
	Tags string
}

// Read returns the running binary's Info.
func Read() Info {
	in := Info{Version: version, Revision: "unknown", GoVersion: runtime.Version()}
	bi, ok := debug.ReadBuildInfo()
	if ok {
		if in.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			in.Version = bi.Main.Version
		}
		dirty := false
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				in.Revision = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			case "-tags":
				in.Tags = s.Value
			}
		}
		if dirty && in.Revision != "unknown" {
			in.Revision += "-dirty"
		}
	}
	if in.Version == "" {
		in.Version = "devel"
	}
	return in
}

// String is the line `--version` prints: "NAME VERSION (REVISION, GO)".
func (in Info) String() string {
	s := fmt.Sprintf("%s (%s, %s", in.Version, in.Revision, in.GoVersion)
	if in.Tags != "" {
		s += ", tags " + in.Tags
	}
	return s + ")"
}

// Print writes the `--version` line of the command name to w.
func Print(w io.Writer, name string) {
	fmt.Fprintf(w, "%s %s\n", name, Read())
}

// Collector is the qtop_build_info gauge (always 1) labelled with the
// build's version, revision and Go version, as Prometheus' own
// <name>_build_info series are.
func Collector() prometheus.Collector {
	in := Read()
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "qtop_build_info",
		Help:        "The running build of qtop: version, revision and Go version as labels (always 1).",
		ConstLabels: prometheus.Labels{"version": in.Version, "revision": in.Revision, "goversion": in.GoVersion},
	})
	g.Set(1)
	return g
}
