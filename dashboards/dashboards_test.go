package dashboards_test

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/qtop-dev/qtop/dashboards"
)

// Ref is one PromQL expression of a dashboard or a rule file.
type Ref struct {
	Where  string // file and panel, variable or rule
	Expr   string
	Legend string // legend format or annotation text, for {{tenant}}
}

// Dashboard is a Grafana dashboard as JSON.
type Dashboard struct {
	File string
	JSON map[string]any
}

func loadDashboards(t *testing.T) []Dashboard {
	t.Helper()
	files, err := fs.Glob(dashboards.FS, dashboards.GrafanaDir+"/*.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 3 {
		t.Fatalf("%d dashboards in %s, want fleet, tenants and collector", len(files), dashboards.GrafanaDir)
	}
	var out []Dashboard
	for _, f := range files {
		b, err := dashboards.FS.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var d map[string]any
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out = append(out, Dashboard{File: f, JSON: d})
	}
	return out
}

// panels returns every panel, those inside rows included.
func panels(d map[string]any) []map[string]any {
	var out []map[string]any
	var walk func(ps []any)
	walk = func(ps []any) {
		for _, p := range ps {
			pm, ok := p.(map[string]any)
			if !ok {
				continue
			}
			out = append(out, pm)
			if sub, ok := pm["panels"].([]any); ok {
				walk(sub)
			}
		}
	}
	ps, _ := d["panels"].([]any)
	walk(ps)
	return out
}

func variables(d map[string]any) []map[string]any {
	var out []map[string]any
	tm, _ := d["templating"].(map[string]any)
	list, _ := tm["list"].([]any)
	for _, v := range list {
		if vm, ok := v.(map[string]any); ok {
			out = append(out, vm)
		}
	}
	return out
}

var labelValuesRE = regexp.MustCompile(`^\s*label_values\(\s*(.*?)\s*,\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\)\s*$`)
var queryResultRE = regexp.MustCompile(`^\s*query_result\((.*)\)\s*$`)

// dashboardRefs returns the expressions of every panel target and query
// variable. A variable query is label_values(selector, label) or
// query_result(expr); its label counts as used.
func dashboardRefs(t *testing.T, d Dashboard) []Ref {
	t.Helper()
	var refs []Ref
	for _, p := range panels(d.JSON) {
		targets, _ := p["targets"].([]any)
		for i, tg := range targets {
			tm, _ := tg.(map[string]any)
			expr, _ := tm["expr"].(string)
			legend, _ := tm["legendFormat"].(string)
			if strings.TrimSpace(expr) == "" {
				t.Errorf("%s: panel %q target %d has no expr", d.File, p["title"], i)
				continue
			}
			refs = append(refs, Ref{Where: fmt.Sprintf("%s panel %q", d.File, p["title"]), Expr: expr, Legend: legend})
		}
		if p["type"] != "row" && len(targets) == 0 && p["type"] != "text" {
			t.Errorf("%s: panel %q has no query", d.File, p["title"])
		}
	}
	for _, v := range variables(d.JSON) {
		if v["type"] != "query" {
			continue
		}
		q, _ := v["query"].(string)
		if qm, ok := v["query"].(map[string]any); ok {
			q, _ = qm["query"].(string)
		}
		where := fmt.Sprintf("%s variable %s", d.File, v["name"])
		switch {
		case labelValuesRE.MatchString(q):
			m := labelValuesRE.FindStringSubmatch(q)
			refs = append(refs, Ref{Where: where, Expr: m[1], Legend: "{{" + m[2] + "}}"})
		case queryResultRE.MatchString(q):
			refs = append(refs, Ref{Where: where, Expr: queryResultRE.FindStringSubmatch(q)[1]})
		default:
			t.Errorf("%s: query %q is neither label_values(metric, label) nor query_result(expr)", where, q)
		}
	}
	return refs
}

func ruleRefs(rules []Rule) []Ref {
	var refs []Ref
	for _, r := range rules {
		name := r.Record + r.Alert
		var text strings.Builder
		for _, k := range []string{"summary", "description"} {
			text.WriteString(r.Annotations[k])
		}
		refs = append(refs, Ref{Where: fmt.Sprintf("%s rule %s", dashboards.RulesFile, name), Expr: r.Expr,
			Legend: strings.ReplaceAll(text.String(), "$labels.", "")})
	}
	return refs
}

var usesTenantRE = regexp.MustCompile(`\{\{\s*\.?tenant\s*\}\}`)

// checkRefs returns what is wrong with refs against the code's catalog:
// an expression that does not parse, a metric the code does not register
// (a histogram's _bucket, _sum and _count count as its name), a
// recording rule that is not defined, and a per-tenant query reading a
// series that is not top N + "other".
func checkRefs(cat *Catalog, rules []Rule, refs []Ref) []string {
	var problems []string
	records := map[string]string{}
	for _, r := range rules {
		if r.Record != "" {
			records[r.Record] = r.Expr
		}
	}
	// raw returns the code metrics behind a name, recording rules expanded.
	var raw func(name string, seen map[string]bool) []string
	raw = func(name string, seen map[string]bool) []string {
		expr, ok := records[name]
		if !ok {
			return []string{name}
		}
		if seen[name] {
			return nil
		}
		seen[name] = true
		q, err := dashboards.Parse(expr)
		if err != nil {
			return nil // reported where the rule itself is checked
		}
		var out []string
		for _, m := range q.Metrics {
			out = append(out, raw(m, seen)...)
		}
		return out
	}
	for _, ref := range refs {
		q, err := dashboards.Parse(ref.Expr)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", ref.Where, err))
			continue
		}
		if len(q.Metrics) == 0 && !strings.Contains(ref.Expr, "vector(") {
			problems = append(problems, fmt.Sprintf("%s: %q reads no metric", ref.Where, ref.Expr))
		}
		for _, m := range q.Metrics {
			if _, ok := records[m]; ok {
				continue
			}
			if strings.Contains(m, ":") {
				problems = append(problems, fmt.Sprintf("%s: %s looks like a recording rule but %s does not define it", ref.Where, m, dashboards.RulesFile))
				continue
			}
			if !strings.HasPrefix(m, "qtop_") {
				problems = append(problems, fmt.Sprintf("%s: %s is not a qtop metric", ref.Where, m))
				continue
			}
			if msg := resolve(cat, m); msg != "" {
				problems = append(problems, fmt.Sprintf("%s: %s", ref.Where, msg))
			}
		}
		for _, sel := range q.Selectors {
			if msg := checkSelector(cat, sel); msg != "" {
				problems = append(problems, fmt.Sprintf("%s: %s", ref.Where, msg))
			}
		}
		if q.UsesLabel("tenant") || usesTenantRE.MatchString(ref.Legend) {
			for _, m := range q.Metrics {
				for _, r := range raw(m, map[string]bool{}) {
					if cm, ok := cat.Lookup(r); ok && !cm.TopN {
						problems = append(problems, fmt.Sprintf("%s: uses the tenant label but reads %s, which is not exported through topn (top N + other)", ref.Where, r))
					}
				}
			}
		}
	}
	return problems
}

// targetLabels are added by Prometheus to every scraped series.
var targetLabels = []string{"job", "instance"}

// checkSelector checks a selector of a code metric: its matchers use
// labels the metric has, and rate-like functions read counters while
// deriv-like ones read gauges. "" if all is well.
func checkSelector(cat *Catalog, sel dashboards.Selector) string {
	name, suffix := sel.Metric, ""
	m, ok := cat.Lookup(name)
	if !ok {
		for _, suf := range []string{"_bucket", "_sum", "_count"} {
			if base, cut := strings.CutSuffix(name, suf); cut {
				if m, ok = cat.Lookup(base); ok {
					suffix = suf
					break
				}
			}
		}
	}
	if !ok {
		return "" // not a code metric (a recording rule), or reported by resolve
	}
	for _, l := range sel.Labels {
		if !slices.Contains(m.Labels, l) && !slices.Contains(m.Const, l) && !slices.Contains(targetLabels, l) &&
			!(l == "le" && suffix == "_bucket") {
			return fmt.Sprintf("%s{%s=…}: %s has no label %s (labels %v, constant %v)", name, l, m.Name, l, m.Labels, m.Const)
		}
	}
	typ := m.Type
	if suffix != "" {
		typ = "COUNTER" // _bucket, _sum and _count are counters
	} else if typ == "" && strings.HasSuffix(name, "_total") {
		typ = "COUNTER" // a vector with no series yet: the name says
	}
	switch sel.Func {
	case "rate", "irate", "increase", "resets":
		if typ != "" && typ != "COUNTER" {
			return fmt.Sprintf("%s(%s): %s is a %s, not a counter", sel.Func, name, name, strings.ToLower(typ))
		}
	case "deriv", "delta", "idelta", "predict_linear":
		if typ != "" && typ != "GAUGE" {
			return fmt.Sprintf("%s(%s): %s is a %s, not a gauge", sel.Func, name, name, strings.ToLower(typ))
		}
	}
	return ""
}

// resolve checks that the code registers name; "" if it does.
func resolve(cat *Catalog, name string) string {
	if m, ok := cat.Lookup(name); ok {
		if m.Type == "HISTOGRAM" || m.Type == "SUMMARY" {
			return fmt.Sprintf("%s is a %s: read its _bucket, _sum or _count series", name, strings.ToLower(m.Type))
		}
		return ""
	}
	for _, suf := range []string{"_bucket", "_sum", "_count"} {
		base, ok := strings.CutSuffix(name, suf)
		if !ok {
			continue
		}
		m, ok := cat.Lookup(base)
		if !ok {
			break
		}
		switch {
		case m.Type == "HISTOGRAM", m.Type == "SUMMARY" && suf != "_bucket":
			return ""
		case m.Type == "":
			return fmt.Sprintf("%s: cannot tell whether %s is a histogram (nothing gathered)", name, base)
		}
		return fmt.Sprintf("%s: %s is a %s, it has no %s series", name, base, strings.ToLower(m.Type), suf)
	}
	return fmt.Sprintf("%s is not registered by the code (nearest: %s)", name, nearest(cat, name))
}

// nearest names the registered metrics that share the longest prefix
// plus suffix with name, to point at a rename.
func nearest(cat *Catalog, name string) string {
	best, out := 0, []string{}
	for _, n := range cat.Names() {
		p := 0
		for p < len(n) && p < len(name) && n[p] == name[p] {
			p++
		}
		s := 0
		for s < len(n)-p && s < len(name)-p && n[len(n)-1-s] == name[len(name)-1-s] {
			s++
		}
		i := p + s
		switch {
		case i > best:
			best, out = i, []string{n}
		case i == best:
			out = append(out, n)
		}
	}
	if len(out) > 3 {
		out = out[:3]
	}
	return strings.Join(out, ", ")
}

// TestDashboardMetrics is the tie between the dashboards, the rules and
// the code: every metric they read is registered by the components, and
// every per-tenant query reads only top-N + "other" series.
func TestDashboardMetrics(t *testing.T) {
	cat := codeCatalog(t)
	rules := loadRules(t)
	refs := ruleRefs(rules)
	for _, d := range loadDashboards(t) {
		refs = append(refs, dashboardRefs(t, d)...)
	}
	for _, p := range checkRefs(cat, rules, refs) {
		t.Error(p)
	}
	read := map[string]bool{}
	for _, ref := range refs {
		q, _ := dashboards.Parse(ref.Expr)
		for _, m := range q.Metrics {
			read[m] = true
		}
	}
	t.Logf("%d expressions checked, %d distinct names read", len(refs), len(read))
}

// TestRenamedMetricFails: the check above catches a metric renamed in
// code, a histogram read without its suffix, and a per-tenant query over
// a series that is not bounded by topn.
func TestRenamedMetricFails(t *testing.T) {
	cat := codeCatalog(t)
	rules := loadRules(t)
	var refs []Ref
	for _, d := range loadDashboards(t) {
		refs = append(refs, dashboardRefs(t, d)...)
	}
	renamed := &Catalog{metrics: map[string]*Metric{}}
	for n, m := range cat.metrics {
		renamed.metrics[n] = m
	}
	const old = "qtop_collector_spool_bytes"
	m := *renamed.metrics[old]
	delete(renamed.metrics, old)
	m.Name = "qtop_collector_spool_size_bytes"
	renamed.metrics[m.Name] = &m
	mentions := func(p []string) int {
		n := 0
		for _, s := range p {
			if strings.Contains(s, old+" is not registered") {
				n++
			}
		}
		return n
	}
	if n := mentions(checkRefs(cat, rules, refs)); n != 0 {
		t.Fatalf("%s reported missing before the rename", old)
	}
	if n := mentions(checkRefs(renamed, rules, refs)); n == 0 {
		t.Errorf("renaming %s in the code's catalog went unnoticed by the dashboards' check", old)
	}
	if n := mentions(checkRefs(renamed, rules, ruleRefs(rules))); n == 0 {
		t.Errorf("renaming %s in the code's catalog went unnoticed by the rules' check", old)
	}

	bad := []Ref{
		{Where: "histogram", Expr: `qtop_collector_merge_seconds`},
		{Where: "per-tenant", Expr: `sum by (tenant) (rate(qtop_collector_reports_total[5m]))`},
		{Where: "legend", Expr: `qtop_enforce_tenants`, Legend: "{{tenant}}"},
		{Where: "counter suffix", Expr: `qtop_collector_reports_total_bucket`},
		{Where: "undefined rule", Expr: `qtop:nothing:rate5m`},
		{Where: "foreign", Expr: `up`},
		{Where: "syntax", Expr: `rate(qtop_collector_reports_total[5m]`},
		{Where: "label", Expr: `qtop_enforce_refused_total{cause="shed"}`},
		{Where: "rate of gauge", Expr: `rate(qtop_collector_spool_bytes[5m])`},
		{Where: "deriv of counter", Expr: `deriv(qtop_collector_reports_total[5m])`},
		{Where: "le on a counter", Expr: `qtop_collector_reports_total{le="1"}`},
	}
	got := checkRefs(cat, rules, bad)
	for _, b := range bad {
		if !slices.ContainsFunc(got, func(s string) bool { return strings.HasPrefix(s, b.Where+":") }) {
			t.Errorf("%s: %q passed the check; problems: %q", b.Where, b.Expr, got)
		}
	}
	ok := []Ref{
		{Where: "rule over topn", Expr: `qtop:tenant_db_load:share5m{tenant!="other"}`},
		{Where: "histogram bucket", Expr: `rate(qtop_collector_store_write_seconds_bucket{le="+Inf", instance="c1"}[5m])`},
		{Where: "constant label", Expr: `qtop_enforce_hotkey_entries{guard="products"}`},
		{Where: "vector without series", Expr: `increase(qtop_collector_dropped_rows_total{reason="spool_full"}[5m])`},
	}
	if got := checkRefs(cat, rules, ok); len(got) > 0 {
		t.Errorf("good expressions refused: %q", got)
	}
}

// TestDatasources: every dashboard has a variable named datasource of
// type datasource (Prometheus) and every panel, target and variable
// reads through it: no hard-coded datasource UID anywhere.
func TestDatasources(t *testing.T) {
	uids := map[string]string{}
	for _, d := range loadDashboards(t) {
		var dsVar map[string]any
		for _, v := range variables(d.JSON) {
			if v["name"] == "datasource" {
				dsVar = v
			}
		}
		if dsVar == nil || dsVar["type"] != "datasource" || dsVar["query"] != "prometheus" {
			t.Errorf("%s: no variable datasource of type datasource for prometheus: %v", d.File, dsVar)
		}
		if id, ok := d.JSON["id"]; ok && id != nil {
			t.Errorf("%s: id %v; an importable dashboard has id null", d.File, id)
		}
		uid, _ := d.JSON["uid"].(string)
		if uid == "" || uids[uid] != "" {
			t.Errorf("%s: uid %q empty or also used by %s", d.File, uid, uids[uid])
		}
		uids[uid] = d.File
		for _, k := range []string{"__inputs", "__requires"} {
			if _, ok := d.JSON[k]; ok {
				t.Errorf("%s: has %s; use the datasource variable instead of import-time inputs", d.File, k)
			}
		}
		for _, p := range checkDatasources(d.JSON, path.Base(d.File)) {
			t.Error(p)
		}
		for _, p := range panels(d.JSON) {
			if p["type"] == "row" {
				continue
			}
			if _, ok := p["datasource"]; !ok {
				t.Errorf("%s: panel %q has no datasource (it would use the default one)", d.File, p["title"])
			}
		}
	}
}

func isDatasourceVar(s string) bool { return s == "${datasource}" || s == "$datasource" }

// checkDatasources walks the JSON for datasource references.
func checkDatasources(v any, where string) []string {
	var out []string
	switch v := v.(type) {
	case map[string]any:
		for k, sub := range v {
			if k == "datasource" {
				switch ds := sub.(type) {
				case string:
					if !isDatasourceVar(ds) {
						out = append(out, fmt.Sprintf("%s: datasource %q is not the variable", where, ds))
					}
				case map[string]any:
					uid, _ := ds["uid"].(string)
					builtin := ds["type"] == "grafana" && uid == "-- Grafana --"
					if !builtin && (!isDatasourceVar(uid) || ds["type"] != "prometheus") {
						out = append(out, fmt.Sprintf("%s: datasource %v is not the prometheus datasource variable", where, ds))
					}
				case nil:
				default:
					out = append(out, fmt.Sprintf("%s: datasource %v", where, ds))
				}
				continue
			}
			out = append(out, checkDatasources(sub, where+"."+k)...)
		}
	case []any:
		for i, sub := range v {
			out = append(out, checkDatasources(sub, fmt.Sprintf("%s[%d]", where, i))...)
		}
	}
	return out
}

// TestDatasourceCheckFails: the walk above refuses hard-coded UIDs.
func TestDatasourceCheckFails(t *testing.T) {
	for _, js := range []string{
		`{"panels":[{"datasource":{"type":"prometheus","uid":"P1809F7CD0C75ACF3"}}]}`,
		`{"panels":[{"targets":[{"datasource":"Prometheus"}]}]}`,
		`{"templating":{"list":[{"datasource":{"type":"loki","uid":"${datasource}"}}]}}`,
	} {
		var v any
		if err := json.Unmarshal([]byte(js), &v); err != nil {
			t.Fatal(err)
		}
		if len(checkDatasources(v, "x")) == 0 {
			t.Errorf("%s passed", js)
		}
	}
}

// TestLayout: what Grafana needs to import and draw a dashboard: a
// title, schema version, unique panel ids, panels inside the 24-column
// grid without overlapping, unique refIds per panel and a title on each.
func TestLayout(t *testing.T) {
	for _, d := range loadDashboards(t) {
		if s, _ := d.JSON["title"].(string); !strings.HasPrefix(s, "qtop / ") {
			t.Errorf("%s: title %q, want \"qtop / …\"", d.File, s)
		}
		if v, _ := d.JSON["schemaVersion"].(float64); v < 36 {
			t.Errorf("%s: schemaVersion %v; data-source references by uid need 36 or later", d.File, v)
		}
		ids := map[float64]bool{}
		type rect struct{ x, y, w, h float64 }
		var placed []rect
		for _, p := range panels(d.JSON) {
			id, _ := p["id"].(float64)
			if id == 0 || ids[id] {
				t.Errorf("%s: panel %q id %v missing or repeated", d.File, p["title"], p["id"])
			}
			ids[id] = true
			if s, _ := p["title"].(string); s == "" {
				t.Errorf("%s: panel %v has no title", d.File, id)
			}
			g, _ := p["gridPos"].(map[string]any)
			r := rect{g["x"].(float64), g["y"].(float64), g["w"].(float64), g["h"].(float64)}
			if r.w <= 0 || r.h <= 0 || r.x < 0 || r.x+r.w > 24 {
				t.Errorf("%s: panel %q gridPos %v outside the grid", d.File, p["title"], g)
			}
			for _, o := range placed {
				if r.x < o.x+o.w && o.x < r.x+r.w && r.y < o.y+o.h && o.y < r.y+r.h {
					t.Errorf("%s: panel %q overlaps another at %v", d.File, p["title"], g)
				}
			}
			placed = append(placed, r)
			refIDs := map[string]bool{}
			targets, _ := p["targets"].([]any)
			for _, tg := range targets {
				id, _ := tg.(map[string]any)["refId"].(string)
				if id == "" || refIDs[id] {
					t.Errorf("%s: panel %q refId %q missing or repeated", d.File, p["title"], id)
				}
				refIDs[id] = true
			}
		}
	}
}
