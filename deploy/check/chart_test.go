package check

import (
	"bytes"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

const chartDir = "../helm/qtop-collector"

// valueSets are the configurations the chart is rendered with: the
// defaults, a ClickHouse fleet with PostgreSQL and a ServiceMonitor, and
// existing secrets without a volume.
var valueSets = map[string]map[string]any{
	"defaults": {},
	"clickhouse-fleet": {
		"replicas":       3,
		"store":          map[string]any{"url": "clickhouse://ch1:9000,ch2:9000/qtop", "cluster": "prod"},
		"postgres":       map[string]any{"dsn": "postgres://qtop_monitor@db:5432/app"},
		"serviceMonitor": map[string]any{"enabled": true, "labels": map[string]any{"release": "prom"}},
		"extraEnv":       []any{map[string]any{"name": "QTOP_SHARED_POLICY", "value": "true"}},
	},
	"existing-secrets": {
		"tokens":         map[string]any{"existingSecret": "qtop-tokens"},
		"postgres":       map[string]any{"existingSecret": "qtop-pg"},
		"persistence":    map[string]any{"enabled": false},
		"service":        map[string]any{"otlpGrpcPort": 0},
		"tls":            map[string]any{"existingSecret": "qtop-cert", "clientCA": true},
		"serviceMonitor": map[string]any{"enabled": true, "clientCertSecret": "prometheus-client"},
	},
	"mesh": {
		"insecure":          true,
		"service":           map[string]any{"rlsPort": 8081},
		"extraVolumes":      []any{map[string]any{"name": "engine-ca", "secret": map[string]any{"secretName": "qtop-engine-ca"}}},
		"extraVolumeMounts": []any{map[string]any{"name": "engine-ca", "mountPath": "/etc/qtop-engines", "readOnly": true}},
	},
}

func TestChartLints(t *testing.T) {
	for name, vals := range valueSets {
		l := lint.All(chartDir, vals, "qtop", false)
		for _, m := range l.Messages {
			if m.Severity >= support.WarningSev {
				t.Errorf("%s: helm lint: %v", name, m)
			}
		}
	}
}

// render returns the chart's manifests rendered with vals, by file.
func render(t *testing.T, vals map[string]any) map[string]string {
	t.Helper()
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	rv, err := chartutil.ToRenderValues(ch, vals, chartutil.ReleaseOptions{Name: "qtop", Namespace: "obs", IsInstall: true}, chartutil.DefaultCapabilities)
	if err != nil {
		t.Fatal(err)
	}
	out, err := engine.Render(ch, rv)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// objects decodes every rendered object strictly (an unknown or misplaced
// field fails) into its Kubernetes type, keyed "Kind/name".
func objects(t *testing.T, files map[string]string) map[string]any {
	t.Helper()
	objs := map[string]any{}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, file := range names {
		if filepath.Ext(file) != ".yaml" {
			continue
		}
		for _, doc := range strings.Split(files[file], "\n---") {
			if strings.TrimSpace(stripComments(doc)) == "" {
				continue
			}
			key, obj, err := decodeStrict([]byte(doc))
			if err != nil {
				t.Errorf("%s: %v\n%s", file, err, doc)
				continue
			}
			objs[key] = obj
		}
	}
	return objs
}

func stripComments(doc string) string {
	var b strings.Builder
	for _, l := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

func decodeStrict(doc []byte) (string, any, error) {
	js, err := yaml.YAMLToJSON(doc)
	if err != nil {
		return "", nil, err
	}
	var meta struct {
		Kind     string `json:"kind"`
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(js, &meta); err != nil {
		return "", nil, err
	}
	var obj any
	switch meta.Kind {
	case "Secret":
		obj = new(corev1.Secret)
	case "Service":
		obj = new(corev1.Service)
	case "StatefulSet":
		obj = new(appsv1.StatefulSet)
	case "Deployment":
		obj = new(appsv1.Deployment)
	case "ServiceMonitor":
		obj = new(monitoringv1.ServiceMonitor)
	default:
		return "", nil, fmt.Errorf("kind %q has no check: add its type", meta.Kind)
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	if err := dec.Decode(obj); err != nil {
		return "", nil, fmt.Errorf("%s %s: %w", meta.Kind, meta.Metadata.Name, err)
	}
	return meta.Kind + "/" + meta.Metadata.Name, obj, nil
}

func TestChartRendersValidObjects(t *testing.T) {
	for name, vals := range valueSets {
		t.Run(name, func(t *testing.T) {
			objs := objects(t, render(t, vals))
			sts, ok := objs["StatefulSet/qtop-qtop-collector"].(*appsv1.StatefulSet)
			if !ok {
				t.Fatalf("no StatefulSet among %v", keys(objs))
			}
			c := sts.Spec.Template.Spec.Containers[0]
			checkProbes(t, name, c)
			env := map[string]corev1.EnvVar{}
			for _, e := range c.Env {
				env[e.Name] = e
			}
			for _, n := range []string{"QTOP_TOKEN_FILE", "QTOP_READ_TOKEN_FILE", "QTOP_ADMIN_TOKEN_FILE", "QTOP_DATA_DIR", "QTOP_STORE"} {
				if _, ok := env[n]; !ok {
					t.Errorf("container env lacks %s", n)
				}
			}
			if _, ok := objs["Service/qtop-qtop-collector"]; !ok {
				t.Errorf("no Service among %v", keys(objs))
			}
			checkSet(t, name, objs, sts)
		})
	}
}

// checkProbes: liveness on /healthz and readiness on /readyz, over HTTPS
// unless the chart runs insecure; with mTLS (the kubelet has no client
// certificate) the probes open the port.
func checkProbes(t *testing.T, name string, c corev1.Container) {
	t.Helper()
	if c.LivenessProbe == nil || c.ReadinessProbe == nil {
		t.Fatalf("probes: liveness %+v readiness %+v", c.LivenessProbe, c.ReadinessProbe)
	}
	if name == "existing-secrets" {
		if c.LivenessProbe.TCPSocket == nil || c.ReadinessProbe.TCPSocket == nil {
			t.Errorf("mTLS: probes %+v %+v, want tcpSocket", c.LivenessProbe, c.ReadinessProbe)
		}
		return
	}
	scheme := corev1.URISchemeHTTPS
	if name == "mesh" {
		scheme = corev1.URISchemeHTTP
	}
	l, r := c.LivenessProbe.HTTPGet, c.ReadinessProbe.HTTPGet
	if l == nil || r == nil || l.Path != "/healthz" || r.Path != "/readyz" || l.Scheme != scheme || r.Scheme != scheme {
		t.Errorf("probes: liveness %+v readiness %+v, want %s", l, r, scheme)
	}
}

// checkSet checks what each value set promises beyond the common parts.
func checkSet(t *testing.T, name string, objs map[string]any, sts *appsv1.StatefulSet) {
	t.Helper()
	switch name {
	case "defaults":
		if env := envOf(sts); env["QTOP_PEERS"] != "" {
			t.Errorf("one replica given peers %q", env["QTOP_PEERS"])
		}
		if len(sts.Spec.VolumeClaimTemplates) != 1 {
			t.Errorf("the data dir is not on a volume: %+v", sts.Spec.VolumeClaimTemplates)
		}
		if _, ok := objs["Secret/qtop-qtop-collector-tokens"]; !ok {
			t.Errorf("no tokens Secret among %v", keys(objs))
		}
		// TLS by default: a certificate made by the chart, served.
		sec, ok := objs["Secret/qtop-qtop-collector-tls"].(*corev1.Secret)
		if !ok || sec.Type != corev1.SecretTypeTLS || len(sec.Data["tls.crt"]) == 0 || len(sec.Data["ca.crt"]) == 0 {
			t.Fatalf("no TLS Secret made by the chart among %v", keys(objs))
		}
		// Valid for a replica's own name, by which its peers reach it.
		blk, _ := pem.Decode(sec.Data["tls.crt"])
		if blk == nil {
			t.Fatal("tls.crt holds no PEM block")
		}
		crt, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		if err := crt.VerifyHostname("qtop-qtop-collector-1.qtop-qtop-collector-pods.obs.svc"); err != nil {
			t.Errorf("the certificate does not name the pods: %v", err)
		}
		if env := envOf(sts); env["QTOP_TLS_CERT_FILE"] == "" || env["QTOP_INSECURE"] != "" {
			t.Errorf("the collector is not given the certificate: %v", env)
		}
	case "clickhouse-fleet":
		sm, ok := objs["ServiceMonitor/qtop-qtop-collector"].(*monitoringv1.ServiceMonitor)
		if !ok {
			t.Fatalf("no ServiceMonitor among %v", keys(objs))
		}
		ep := sm.Spec.Endpoints[0]
		if ep.Authorization == nil || ep.Authorization.Credentials == nil || ep.Authorization.Credentials.Key != "read-token" {
			t.Errorf("the scrape has no read token: %+v", ep.Authorization)
		}
		if *sts.Spec.Replicas != 3 {
			t.Errorf("replicas %d, want 3", *sts.Spec.Replicas)
		}
		// The replicas reach each other by the names the headless
		// Service governing them gives (a ClusterIP one gives none), and
		// each is given all of them, itself included.
		svc, ok := objs["Service/qtop-qtop-collector-pods"].(*corev1.Service)
		if !ok || svc.Spec.ClusterIP != corev1.ClusterIPNone || sts.Spec.ServiceName != svc.Name {
			t.Errorf("the StatefulSet's service %q, headless %+v", sts.Spec.ServiceName, svc)
		}
		env := envOf(sts)
		want := "https://qtop-qtop-collector-0.qtop-qtop-collector-pods.obs.svc:7070,https://qtop-qtop-collector-1.qtop-qtop-collector-pods.obs.svc:7070,https://qtop-qtop-collector-2.qtop-qtop-collector-pods.obs.svc:7070"
		if env["QTOP_PEERS"] != want || env["QTOP_CA_FILE"] != "/etc/qtop-tls/ca.crt" {
			t.Errorf("peers %q, CA %q; want %q and the Secret's ca.crt", env["QTOP_PEERS"], env["QTOP_CA_FILE"], want)
		}
	case "existing-secrets":
		if _, ok := objs["Secret/qtop-qtop-collector-tokens"]; ok {
			t.Error("made a tokens Secret although one exists")
		}
		if _, ok := objs["Secret/qtop-qtop-collector-tls"]; ok {
			t.Error("made a TLS Secret although one is given")
		}
		if env := envOf(sts); env["QTOP_TLS_CLIENT_CA_FILE"] == "" {
			t.Errorf("clientCA set but no client CA: %v", env)
		}
		if len(sts.Spec.VolumeClaimTemplates) != 0 {
			t.Errorf("persistence off but %d claims", len(sts.Spec.VolumeClaimTemplates))
		}
	case "mesh":
		if env := envOf(sts); env["QTOP_INSECURE"] != "true" || env["QTOP_RLS_LISTEN"] == "" || env["QTOP_TLS_CERT_FILE"] != "" {
			t.Errorf("insecure with the rate-limit service: %v", env)
		}
		if svc, ok := objs["Service/qtop-qtop-collector"].(*corev1.Service); !ok || len(svc.Spec.Ports) != 3 {
			t.Errorf("the Service does not expose the rate-limit port: %+v", objs["Service/qtop-qtop-collector"])
		}
		if vs := sts.Spec.Template.Spec.Volumes; len(vs) == 0 || vs[len(vs)-1].Name != "engine-ca" {
			t.Errorf("extra volume missing: %+v", vs)
		}
	}
}

// envOf is the collector container's environment, values only.
func envOf(sts *appsv1.StatefulSet) map[string]string {
	env := map[string]string{}
	for _, e := range sts.Spec.Template.Spec.Containers[0].Env {
		env[e.Name] = e.Value
	}
	return env
}

func keys(m map[string]any) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// TestChartRefusesClientCAWithoutItsCA: mTLS needs a CA whose key signs
// the clients, which the chart's own does not keep, and a ServiceMonitor
// needs a client certificate to scrape under it, and several replicas
// need a shared store (each DuckDB would hold a part of the history): the
// chart says so rather than render what cannot work.
func TestChartRefusesClientCAWithoutItsCA(t *testing.T) {
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	for want, vals := range map[string]map[string]any{
		"needs tls.existingSecret": {"tls": map[string]any{"clientCA": true}},
		"needs serviceMonitor.clientCertSecret": {"tls": map[string]any{"clientCA": true, "existingSecret": "qtop-cert"},
			"serviceMonitor": map[string]any{"enabled": true}},
		"replicas > 1 needs a shared store": {"replicas": 3},
	} {
		rv, err := chartutil.ToRenderValues(ch, vals, chartutil.ReleaseOptions{Name: "qtop", Namespace: "obs", IsInstall: true}, chartutil.DefaultCapabilities)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := engine.Render(ch, rv); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%v: %v, want an error that %s", vals, err, want)
		}
	}
}
