package dashboards_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/qtop-dev/qtop/enforce"
	"github.com/qtop-dev/qtop/hotkey"
	"github.com/qtop-dev/qtop/internal/collector"
	"github.com/qtop-dev/qtop/internal/testsvc"
	"github.com/qtop-dev/qtop/meter"
	"github.com/qtop-dev/qtop/report"
	"github.com/qtop-dev/qtop/tenant"
	"github.com/qtop-dev/qtop/tlsfiles"
	"github.com/qtop-dev/qtop/tlsfiles/tlstest"
	"github.com/qtop-dev/qtop/topn"
)

// Metric is what the code registers under one name.
type Metric struct {
	Name   string
	Labels []string // variable labels of its descriptor
	Const  []string // constant labels of its descriptor
	TopN   bool     // exported through a topn.Collector: top N + "other"
	From   []string // the components that registered it
	Type   string   // from a gather ("" when no series was gathered)
}

// Catalog is every metric the qtop components register, built by running
// them with recording registerers.
type Catalog struct {
	mu      sync.Mutex
	metrics map[string]*Metric
	regs    []*prometheus.Registry
}

// Lookup returns the metric registered under name.
func (c *Catalog) Lookup(name string) (*Metric, bool) {
	m, ok := c.metrics[name]
	return m, ok
}

// Names returns the registered names, sorted.
func (c *Catalog) Names() []string {
	out := make([]string, 0, len(c.metrics))
	for n := range c.metrics {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// Registerer returns a registerer for one component (a process in
// production), which records every collector's descriptors.
func (c *Catalog) Registerer(component string) prometheus.Registerer {
	reg := prometheus.NewRegistry()
	c.regs = append(c.regs, reg)
	return &recordingRegisterer{c: c, reg: reg, component: component}
}

type recordingRegisterer struct {
	c         *Catalog
	reg       *prometheus.Registry
	component string
}

var _ prometheus.Registerer = (*recordingRegisterer)(nil)

var (
	descRE  = regexp.MustCompile(`^Desc\{fqName: ("(?:[^"\\]|\\.)*"), help: "(?:[^"\\]|\\.)*", unit: "(?:[^"\\]|\\.)*", constLabels: \{(.*)\}, variableLabels: \{([^}]*)\}\}$`)
	constRE = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="(?:[^"\\]|\\.)*"`)
)

// parseDesc reads the name, variable and constant labels from
// Desc.String().
func parseDesc(s string) (name string, labels, consts []string, err error) {
	m := descRE.FindStringSubmatch(s)
	if m == nil {
		return "", nil, nil, fmt.Errorf("unexpected descriptor %s", s)
	}
	if name, err = strconv.Unquote(m[1]); err != nil {
		return "", nil, nil, fmt.Errorf("descriptor %s: %v", s, err)
	}
	for _, c := range constRE.FindAllStringSubmatch(m[2], -1) {
		consts = append(consts, c[1])
	}
	for _, l := range strings.Split(m[3], ",") {
		l = strings.TrimSuffix(strings.TrimPrefix(l, "c("), ")") // constrained labels
		if l != "" {
			labels = append(labels, l)
		}
	}
	return name, labels, consts, nil
}

func (r *recordingRegisterer) Register(col prometheus.Collector) error {
	if err := r.reg.Register(col); err != nil {
		return err
	}
	ch := make(chan *prometheus.Desc)
	go func() {
		col.Describe(ch)
		close(ch)
	}()
	_, isTopN := col.(*topn.Collector)
	if b, ok := col.(interface{ BoundedCardinality() int }); ok && b.BoundedCardinality() > 0 {
		isTopN = true // a per-tenant collector of bounded, stated cardinality
	}
	var errs []error
	for d := range ch {
		name, labels, consts, err := parseDesc(d.String())
		if err != nil {
			errs = append(errs, err)
			continue
		}
		r.c.mu.Lock()
		m := r.c.metrics[name]
		if m == nil {
			m = &Metric{Name: name, Labels: labels, Const: consts, TopN: isTopN}
			r.c.metrics[name] = m
		} else if m.TopN != isTopN || !slices.Equal(m.Labels, labels) {
			errs = append(errs, fmt.Errorf("%s registered twice with different labels or exporters", name))
		}
		if !slices.Contains(m.From, r.component) {
			m.From = append(m.From, r.component)
		}
		r.c.mu.Unlock()
	}
	if len(errs) > 0 {
		return fmt.Errorf("recording registerer: %v", errs)
	}
	return nil
}

func (r *recordingRegisterer) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

func (r *recordingRegisterer) Unregister(c prometheus.Collector) bool { return r.reg.Unregister(c) }

// gather reads every registry, recording each family's type, and
// returns the families that no registered descriptor announced.
func (c *Catalog) gather() ([]string, error) {
	var stray []string
	for _, reg := range c.regs {
		fams, err := reg.Gather()
		if err != nil {
			return nil, err
		}
		for _, f := range fams {
			m, ok := c.metrics[f.GetName()]
			if !ok {
				stray = append(stray, f.GetName())
				continue
			}
			m.Type = f.GetType().String()
		}
	}
	return stray, nil
}

// series returns the label sets gathered for name.
func (c *Catalog) series(name string) []map[string]string {
	var out []map[string]string
	for _, reg := range c.regs {
		fams, _ := reg.Gather()
		for _, f := range fams {
			if f.GetName() != name {
				continue
			}
			for _, m := range f.GetMetric() {
				out = append(out, labelMap(m))
			}
		}
	}
	return out
}

func labelMap(m *dto.Metric) map[string]string {
	l := map[string]string{}
	for _, p := range m.GetLabel() {
		l[p.GetName()] = p.GetValue()
	}
	return l
}

var (
	catalogOnce sync.Once
	catalog     *Catalog
	catalogErr  error
)

// codeCatalog builds, once per test binary, the catalog of what the qtop
// components register when wired as cmd/collector and an application
// wire them: the collector on the embedded DuckDB store and on
// ClickHouse (each with its spool), and an application process with a
// recorder, a reporter sending to the first collector and the
// enforcement middleware. Load goes through all of it, so per-tenant
// series exist when the registries are gathered.
func codeCatalog(t *testing.T) *Catalog {
	t.Helper()
	addr := testsvc.ClickHouse(t) // skips, or fails under CI, without ClickHouse
	catalogOnce.Do(func() {
		// TLS and --retention register metrics of their own.
		ca := tlstest.NewCA(t, "dashboards")
		cert, key := ca.Server(t, "collector")
		catalog, catalogErr = buildCatalog(addr, tlsfiles.ServerFiles{Cert: cert, Key: key})
	})
	if catalogErr != nil {
		t.Fatal(catalogErr)
	}
	return catalog
}

func buildCatalog(chAddr string, tls tlsfiles.ServerFiles) (cat *Catalog, err error) {
	cat = &Catalog{metrics: map[string]*Metric{}}
	dir, err := os.MkdirTemp("", "qtop-dashboards-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// The collector on its default, embedded store, serving TLS and
	// keeping 90 days.
	duck, err := collector.New(collector.Config{
		Store:       "duckdb://" + filepath.Join(dir, "qtop.duckdb"),
		DataDir:     filepath.Join(dir, "duck"),
		Writer:      "dashboards-duck",
		Token:       "dashboards",
		Registerer:  cat.Registerer("collector on duckdb"),
		TLSConfig:   collector.TLSConfig{TLS: tls},
		StoreConfig: collector.StoreConfig{Retention: 90 * 24 * time.Hour},
	})
	if err != nil {
		return nil, fmt.Errorf("collector on duckdb: %w", err)
	}
	defer func() {
		if e := duck.Shutdown(ctx); e != nil && err == nil {
			err = fmt.Errorf("collector on duckdb: shutdown: %w", e)
		}
	}()
	hs := httptest.NewServer(duck.Handler())
	defer hs.Close()

	// An application process reporting to it, behind the enforcement
	// middleware.
	app := cat.Registerer("application")
	rec, err := meter.NewRecorder(meter.WithSource(report.Source{Service: "checkout", Instance: "i1", Host: "h1"}),
		meter.WithRegisterer(app))
	if err != nil {
		return nil, fmt.Errorf("recorder: %w", err)
	}
	rep, err := meter.NewReporter(hs.URL+"/v1/reports", rec, meter.WithRegisterer(app), meter.WithToken("dashboards"))
	if err != nil {
		return nil, fmt.Errorf("reporter: %w", err)
	}
	defer rep.Shutdown(ctx)
	enf, err := enforce.New()
	if err != nil {
		return nil, fmt.Errorf("enforcer: %w", err)
	}
	em, err := enforce.NewMetrics(app, enf, 10, 0)
	if err != nil {
		return nil, fmt.Errorf("enforce metrics: %w", err)
	}
	mw, err := enforce.NewMiddleware(enf, enforce.WithMetrics(em), enforce.WithHeaderTenant("X-Tenant", "X-Tier"))
	if err != nil {
		return nil, fmt.Errorf("middleware: %w", err)
	}
	guard, err := hotkey.New(func(_ context.Context, key string) (string, error) { return "v:" + key, nil },
		func(k string) string { return k })
	if err != nil {
		return nil, fmt.Errorf("hot-key guard: %w", err)
	}
	if err := hotkey.NewMetrics(app, "products", guard); err != nil {
		return nil, fmt.Errorf("hot-key guard metrics: %w", err)
	}
	h := mw.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := guard.Get(r.Context(), "product:1"); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		tags, _ := tenant.From(r.Context())
		rec.Record(meter.Record{Time: time.Now(), Tags: tags, Kind: report.KindRequest, Duration: 3 * time.Millisecond, RU: 1})
		rec.Record(meter.Record{Time: time.Now(), Tags: tags, Kind: report.KindDB, Duration: 2 * time.Millisecond, Rows: 1})
		w.Write([]byte("ok"))
	}))
	for i, tn := range []string{"acme", "acme", "bigco"} {
		req := httptest.NewRequest(http.MethodGet, "/x", nil)
		req.Header.Set("X-Tenant", tn)
		req.Header.Set("X-Tier", "T2")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			return nil, fmt.Errorf("request %d through the middleware: %d %s", i, w.Code, w.Body)
		}
	}
	if err := rep.ForceFlush(ctx); err != nil {
		return nil, fmt.Errorf("reporter flush: %w", err)
	}
	duck.Tick(ctx, time.Now()) // the per-tenant series take the second's work at the collector's tick

	// The collector on ClickHouse, which adds the store's own metrics.
	db := fmt.Sprintf("qtop_dashboards_test_%d", time.Now().UnixNano())
	defer dropDatabase(chAddr, db)
	ch, err := collector.New(collector.Config{
		Store:      "clickhouse://" + chAddr + "/" + db,
		DataDir:    filepath.Join(dir, "ch"),
		Writer:     "dashboards-ch",
		Token:      "dashboards",
		Registerer: cat.Registerer("collector on clickhouse"),
	})
	if err != nil {
		return nil, fmt.Errorf("collector on clickhouse: %w", err)
	}
	if err := ch.Shutdown(ctx); err != nil {
		return nil, fmt.Errorf("collector on clickhouse: shutdown: %w", err)
	}

	stray, err := cat.gather()
	if err != nil {
		return nil, fmt.Errorf("gather: %w", err)
	}
	if len(stray) > 0 {
		return nil, fmt.Errorf("gathered families no descriptor announced (unchecked collectors?): %q", stray)
	}
	return cat, nil
}

func dropDatabase(addr, db string) {
	conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{addr}})
	if err != nil {
		return
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn.Exec(ctx, "DROP DATABASE IF EXISTS "+db)
}

func TestParseDesc(t *testing.T) {
	d := prometheus.NewDesc("qtop_x_total", `help with "quotes", } and {braces}`, []string{"tier", "reason"},
		prometheus.Labels{"guard": "a}b", "zone": `q"x`})
	name, labels, consts, err := parseDesc(d.String())
	if err != nil {
		t.Fatal(err)
	}
	if name != "qtop_x_total" || !slices.Equal(labels, []string{"tier", "reason"}) || !slices.Equal(consts, []string{"guard", "zone"}) {
		t.Errorf("parseDesc(%s) = %q %q %q", d, name, labels, consts)
	}
	if _, _, _, err := parseDesc("Desc{something else}"); err == nil {
		t.Error("parseDesc accepted a string that is not a descriptor")
	}
}
