package check

import (
	"net"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

const sidecarFile = "../kubernetes/gate-sidecar.yaml"

// TestGateSidecar: the gate's sidecar example decodes strictly into the
// Kubernetes types, and its parts agree: the Service reaches the gate's
// listener, the gate's upstream is the app's port on loopback, the probes
// ask the metrics listener for /readyz and /healthz, the pod waits longer
// than the gate's drain, and every QTOP_ variable is one the gate reads.
func TestGateSidecar(t *testing.T) {
	b, err := os.ReadFile(sidecarFile)
	if err != nil {
		t.Fatal(err)
	}
	objs := map[string]any{}
	for _, doc := range strings.Split(string(b), "\n---\n") {
		if strings.TrimSpace(stripComments(doc)) == "" {
			continue
		}
		key, obj, err := decodeStrict([]byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		objs[key] = obj
	}
	dep, ok := objs["Deployment/shop-node"].(*appsv1.Deployment)
	svc, ok2 := objs["Service/shop-node"].(*corev1.Service)
	if !ok || !ok2 {
		t.Fatalf("want Deployment/shop-node and Service/shop-node, have %v", keys(objs))
	}
	var app, gate *corev1.Container
	for i, c := range dep.Spec.Template.Spec.Containers {
		switch c.Name {
		case "app":
			app = &dep.Spec.Template.Spec.Containers[i]
		case "gate":
			gate = &dep.Spec.Template.Spec.Containers[i]
		}
	}
	if app == nil || gate == nil {
		t.Fatal("want containers app and gate")
	}
	env := map[string]string{}
	for _, e := range gate.Env {
		env[e.Name] = e.Value
	}
	port := func(c *corev1.Container, name string) int32 {
		for _, p := range c.Ports {
			if p.Name == name {
				return p.ContainerPort
			}
		}
		t.Fatalf("container %s has no port %q", c.Name, name)
		return 0
	}
	listenPort := func(addr string) int32 {
		_, p, err := net.SplitHostPort(addr)
		n, err2 := strconv.Atoi(p)
		if err != nil || err2 != nil {
			t.Fatalf("address %q", addr)
		}
		return int32(n)
	}
	if got := listenPort(env["QTOP_GATE_LISTEN"]); got != port(gate, "http") {
		t.Errorf("the gate listens on %d, its port http is %d", got, port(gate, "http"))
	}
	if got := listenPort(env["QTOP_GATE_METRICS_LISTEN"]); got != port(gate, "gate-metrics") {
		t.Errorf("the gate's metrics listen on %d, its port gate-metrics is %d", got, port(gate, "gate-metrics"))
	}
	up, err := url.Parse(env["QTOP_UPSTREAM"])
	if err != nil || up.Hostname() != "127.0.0.1" || up.Port() != strconv.Itoa(int(port(app, "app"))) {
		t.Errorf("upstream %q, want the app's port %d on loopback", env["QTOP_UPSTREAM"], port(app, "app"))
	}
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].TargetPort.StrVal != "http" {
		t.Errorf("the Service does not send to the gate's port: %+v", svc.Spec.Ports)
	}
	r, l := gate.ReadinessProbe, gate.LivenessProbe
	if r == nil || l == nil || r.HTTPGet == nil || l.HTTPGet == nil || r.HTTPGet.Path != "/readyz" || l.HTTPGet.Path != "/healthz" ||
		r.HTTPGet.Port.StrVal != "gate-metrics" || l.HTTPGet.Port.StrVal != "gate-metrics" {
		t.Errorf("probes: readiness %+v, liveness %+v", r, l)
	}
	delay, err := time.ParseDuration(env["QTOP_GATE_DRAIN_DELAY"])
	if err != nil {
		t.Fatalf("QTOP_GATE_DRAIN_DELAY: %v", err)
	}
	if g := dep.Spec.Template.Spec.TerminationGracePeriodSeconds; g == nil || time.Duration(*g)*time.Second <= delay+30*time.Second {
		t.Errorf("terminationGracePeriodSeconds %v, want more than the gate's drain delay (%v) and 30 s grace", g, delay)
	}
	bin := buildCmd(t, t.TempDir(), "./cmd/gate")
	help, _ := exec.Command(bin, "--help").CombinedOutput()
	for _, n := range regexp.MustCompile(`QTOP_[A-Z0-9_]+`).FindAllString(string(b), -1) {
		if !strings.Contains(string(help), n) {
			t.Errorf("the example sets %s, which gate --help does not mention", n)
		}
	}
}
