package dashboards

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Errors of Parse; test with errors.Is.
var (
	// ErrSyntax: the expression does not scan as PromQL (an unbalanced
	// bracket, an unterminated string, an unknown function).
	ErrSyntax = errors.New("dashboards: promql syntax")
	// ErrUnsupported: the expression selects metrics in a way Parse
	// cannot name (a regular expression on __name__, a selector with no
	// metric name), so it could hide a metric from the checks.
	ErrUnsupported = errors.New("dashboards: promql unsupported")
)

// Query is what a PromQL expression reads: the metric names it selects
// and the label names it uses (in matchers, in by/without/on/ignoring/
// group_left/group_right lists, and as label_replace/label_join
// arguments). Both are sorted and unique. Selectors lists every vector
// selector in the order written.
type Query struct {
	Metrics   []string
	Labels    []string
	Selectors []Selector
}

// Selector is one vector selector: the metric it names, the labels its
// matchers use, and the function or aggregation directly around it
// ("rate" in sum(rate(m[5m])), "" when none).
type Selector struct {
	Metric string
	Labels []string
	Func   string
}

// UsesLabel reports whether q uses the label name.
func (q Query) UsesLabel(name string) bool {
	_, ok := slices.BinarySearch(q.Labels, name)
	return ok
}

// functions are PromQL's functions and aggregation operators; an
// identifier followed by "(" must be one of them.
var functions = map[string]bool{}

func init() {
	for _, f := range strings.Fields(`
		abs absent absent_over_time acos acosh asin asinh atan atanh avg_over_time
		ceil changes clamp clamp_max clamp_min cos cosh count_over_time day_of_month
		day_of_week day_of_year days_in_month deg delta deriv exp floor
		histogram_avg histogram_count histogram_fraction histogram_quantile
		histogram_stddev histogram_stdvar histogram_sum holt_winters double_exponential_smoothing
		hour idelta increase irate label_join label_replace last_over_time ln log10 log2
		mad_over_time max_over_time min_over_time minute month pi predict_linear
		present_over_time quantile_over_time rad rate resets round scalar sgn sin sinh
		sort sort_by_label sort_by_label_desc sort_desc sqrt stddev_over_time
		stdvar_over_time sum_over_time tan tanh time timestamp vector year
		sum avg count min max group stddev stdvar topk bottomk quantile count_values
		limitk limit_ratio start end`) {
		functions[f] = true
	}
}

// aggregations may take "by (…)" or "without (…)" between their name
// and their argument.
var aggregations = map[string]bool{
	"sum": true, "avg": true, "count": true, "min": true, "max": true, "group": true,
	"stddev": true, "stdvar": true, "topk": true, "bottomk": true, "quantile": true,
	"count_values": true, "limitk": true, "limit_ratio": true,
}

// keywords may stand at expression level without being metric names.
var keywords = map[string]bool{
	"and": true, "or": true, "unless": true, "atan2": true, "bool": true, "offset": true,
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
	"inf": true, "nan": true,
}

// grouping keywords take a parenthesised list of label names.
var grouping = map[string]bool{
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
}

// Parse scans a PromQL expression, as written in a rule file or a Grafana
// panel (Grafana variables such as $__rate_interval, ${tier} or [[x]] are
// skipped), and returns the metrics it selects and the labels it uses.
// Names in string literals are never taken for metrics, except in a
// {__name__="…"} matcher. It returns ErrSyntax for what cannot be PromQL
// and ErrUnsupported for a selector whose metric it cannot name.
//
// Parse is a scanner, not a full parser: it checks that brackets balance
// and that every call is a known function, which is what a check of
// metric names needs, and leaves the rest to Prometheus.
func Parse(expr string) (Query, error) {
	p := scanner{s: expr}
	if err := p.run(); err != nil {
		return Query{}, err
	}
	return Query{Metrics: sortedKeys(p.metrics), Labels: sortedKeys(p.labels), Selectors: p.sels}, nil
}

// paren is one open parenthesis: a call's, or a grouping one.
type paren struct {
	call bool
	fn   string // the function called
	arg  int    // index of the current argument
}

type scanner struct {
	s       string
	i       int
	parens  []paren
	metrics map[string]bool
	labels  map[string]bool
	sels    []Selector
}

func (p *scanner) errorf(sentinel error, format string, args ...any) error {
	return fmt.Errorf("%w: %s at offset %d in %q", sentinel, fmt.Sprintf(format, args...), p.i, p.s)
}

func (p *scanner) addSelector(m string, labels []string) {
	if p.metrics == nil {
		p.metrics = map[string]bool{}
	}
	p.metrics[m] = true
	fn := ""
	if n := len(p.parens); n > 0 && p.parens[n-1].call {
		fn = p.parens[n-1].fn
	}
	p.sels = append(p.sels, Selector{Metric: m, Labels: labels, Func: fn})
}

func (p *scanner) addLabel(l string) {
	if p.labels == nil {
		p.labels = map[string]bool{}
	}
	p.labels[l] = true
}

func (p *scanner) run() error {
	for p.skipSpace(); p.i < len(p.s); p.skipSpace() {
		c := p.s[p.i]
		switch {
		case c == '"' || c == '\'' || c == '`':
			v, err := p.str()
			if err != nil {
				return err
			}
			p.labelArg(v)
		case c == '$':
			if err := p.variable(); err != nil {
				return err
			}
		case isDigit(c) || (c == '.' && p.i+1 < len(p.s) && isDigit(p.s[p.i+1])):
			for p.i < len(p.s) && (isIdent(p.s[p.i]) || p.s[p.i] == '.') {
				p.i++
			}
		case isIdentStart(c):
			if err := p.ident(); err != nil {
				return err
			}
		case c == '{':
			if err := p.matchers(""); err != nil {
				return err
			}
		case c == '[':
			if err := p.skipRange(); err != nil {
				return err
			}
		case c == '(':
			p.parens = append(p.parens, paren{})
			p.i++
		case c == ')':
			if len(p.parens) == 0 {
				return p.errorf(ErrSyntax, "unbalanced )")
			}
			p.parens = p.parens[:len(p.parens)-1]
			p.i++
		case c == ',':
			n := len(p.parens)
			if n == 0 || !p.parens[n-1].call {
				return p.errorf(ErrSyntax, "comma outside a call")
			}
			p.parens[n-1].arg++
			p.i++
		case c == ']' || c == '}':
			return p.errorf(ErrSyntax, "unbalanced %c", c)
		case strings.IndexByte("+-*/%^=!<>@:", c) >= 0:
			p.i++
		default:
			return p.errorf(ErrSyntax, "unexpected %q", c)
		}
	}
	if len(p.parens) != 0 {
		return p.errorf(ErrSyntax, "unclosed (")
	}
	return nil
}

// labelArg records a string argument of label_replace (dst, src) or
// label_join (dst, src…) as a label name.
func (p *scanner) labelArg(v string) {
	n := len(p.parens)
	if n == 0 {
		return
	}
	c := p.parens[n-1]
	switch {
	case c.fn == "label_replace" && (c.arg == 1 || c.arg == 3),
		c.fn == "label_join" && (c.arg == 1 || c.arg >= 3):
		if v != "" {
			p.addLabel(v)
		}
	}
}

func (p *scanner) ident() error {
	start := p.i
	for p.i < len(p.s) && isIdent(p.s[p.i]) {
		p.i++
	}
	name := p.s[start:p.i]
	lower := strings.ToLower(name)
	p.skipSpace()
	next := byte(0)
	if p.i < len(p.s) {
		next = p.s[p.i]
	}
	switch {
	case grouping[lower]:
		if next == '(' {
			return p.labelList()
		}
		return nil
	case keywords[lower]:
		return nil
	case aggregations[lower] && isIdentStart(next):
		// sum by (a) (…), sum without (a) (…)
		w := p.i
		for w < len(p.s) && isIdent(p.s[w]) {
			w++
		}
		if kw := strings.ToLower(p.s[p.i:w]); kw != "by" && kw != "without" {
			return p.errorf(ErrSyntax, "%s followed by %s", name, p.s[p.i:w])
		}
		p.i = w
		if p.skipSpace(); p.i >= len(p.s) || p.s[p.i] != '(' {
			return p.errorf(ErrSyntax, "%s by/without without a label list", name)
		}
		if err := p.labelList(); err != nil {
			return err
		}
		if p.skipSpace(); p.i >= len(p.s) || p.s[p.i] != '(' {
			return p.errorf(ErrSyntax, "%s without its argument", name)
		}
		p.parens = append(p.parens, paren{call: true, fn: lower})
		p.i++
		return nil
	case next == '(':
		fn := name
		if aggregations[lower] {
			fn = lower
		}
		if !functions[fn] {
			return p.errorf(ErrSyntax, "unknown function %s", name)
		}
		p.parens = append(p.parens, paren{call: true, fn: fn})
		p.i++
		return nil
	case next == '{':
		return p.matchers(name)
	}
	p.addSelector(name, nil)
	return nil
}

// labelList reads "(a, b, …)" after a grouping keyword.
func (p *scanner) labelList() error {
	p.i++ // (
	for p.skipSpace(); p.i < len(p.s); p.skipSpace() {
		c := p.s[p.i]
		switch {
		case c == ')':
			p.i++
			return nil
		case c == ',':
			p.i++
		case isIdentStart(c):
			start := p.i
			for p.i < len(p.s) && isIdent(p.s[p.i]) {
				p.i++
			}
			p.addLabel(p.s[start:p.i])
		case c == '"' || c == '\'':
			v, err := p.str()
			if err != nil {
				return err
			}
			p.addLabel(v)
		case c == '$':
			if err := p.variable(); err != nil {
				return err
			}
		default:
			return p.errorf(ErrSyntax, "unexpected %q in a label list", c)
		}
	}
	return p.errorf(ErrSyntax, "unclosed label list")
}

// matchers reads "{label op "value", …}"; metric is the name before the
// brace, "" when the selector has none.
func (p *scanner) matchers(metric string) error {
	p.i++ // {
	label, op := "", ""
	var labels []string
	for p.skipSpace(); p.i < len(p.s); p.skipSpace() {
		c := p.s[p.i]
		switch {
		case c == '}':
			p.i++
			if metric == "" {
				return p.errorf(ErrUnsupported, "selector without a metric name")
			}
			p.addSelector(metric, labels)
			return nil
		case c == ',':
			label, op = "", ""
			p.i++
		case isIdentStart(c):
			start := p.i
			for p.i < len(p.s) && isIdent(p.s[p.i]) {
				p.i++
			}
			label, op = p.s[start:p.i], ""
			if label != "__name__" {
				p.addLabel(label)
				labels = append(labels, label)
			}
		case c == '=' || c == '!' || c == '~':
			op += string(c)
			p.i++
		case c == '"' || c == '\'' || c == '`':
			v, err := p.str()
			if err != nil {
				return err
			}
			if label == "__name__" {
				if op != "=" {
					return p.errorf(ErrUnsupported, "__name__%s matcher", op)
				}
				if !validName(v) {
					return p.errorf(ErrSyntax, "metric name %q", v)
				}
				if metric != "" && v != metric {
					return p.errorf(ErrSyntax, "two metric names, %s and %s", metric, v)
				}
				metric = v
			}
		case c == '$':
			if err := p.variable(); err != nil {
				return err
			}
		default:
			return p.errorf(ErrSyntax, "unexpected %q in matchers", c)
		}
	}
	return p.errorf(ErrSyntax, "unclosed {")
}

// skipRange skips "[5m]", "[1h:1m]", "[$__rate_interval]", "[[var]]".
func (p *scanner) skipRange() error {
	n := 0
	for ; p.i < len(p.s); p.i++ {
		switch p.s[p.i] {
		case '[':
			n++
		case ']':
			n--
			if n == 0 {
				p.i++
				return nil
			}
		}
	}
	return p.errorf(ErrSyntax, "unclosed [")
}

// variable skips a Grafana variable: $name, ${name}, ${name:format}.
func (p *scanner) variable() error {
	p.i++ // $
	if p.i < len(p.s) && p.s[p.i] == '{' {
		end := strings.IndexByte(p.s[p.i:], '}')
		if end < 0 {
			return p.errorf(ErrSyntax, "unclosed ${")
		}
		p.i += end + 1
		return nil
	}
	start := p.i
	for p.i < len(p.s) && isIdent(p.s[p.i]) && p.s[p.i] != ':' {
		p.i++
	}
	if p.i == start {
		return p.errorf(ErrSyntax, "$ without a variable name")
	}
	return nil
}

// str reads a string literal and returns its value (escapes kept as
// written, which is enough for names).
func (p *scanner) str() (string, error) {
	q := p.s[p.i]
	start := p.i + 1
	for p.i = start; p.i < len(p.s); p.i++ {
		switch p.s[p.i] {
		case '\\':
			if q != '`' {
				p.i++
			}
		case q:
			v := p.s[start:p.i]
			p.i++
			return v, nil
		}
	}
	return "", p.errorf(ErrSyntax, "unterminated string")
}

func (p *scanner) skipSpace() {
	for p.i < len(p.s) {
		switch p.s[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		case '#':
			for p.i < len(p.s) && p.s[p.i] != '\n' {
				p.i++
			}
		default:
			return
		}
	}
}

func isDigit(c byte) bool      { return '0' <= c && c <= '9' }
func isIdentStart(c byte) bool { return c == '_' || c == ':' || ('a' <= c|0x20 && c|0x20 <= 'z') }
func isIdent(c byte) bool      { return isIdentStart(c) || isDigit(c) }

func validName(s string) bool {
	if s == "" || !isIdentStart(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if !isIdent(s[i]) {
			return false
		}
	}
	return true
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
