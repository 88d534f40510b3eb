package collector

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/qtop-dev/qtop/api"
)

// hygieneDo serves one request on h, with token as the bearer when set.
func hygieneDo(h http.Handler, method, target, token string, body io.Reader) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, target, body)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w
}

// failingBody yields some bytes, then err.
type failingBody struct {
	head []byte
	err  error
}

func (b *failingBody) Read(p []byte) (int, error) {
	if len(b.head) > 0 {
		n := copy(p, b.head)
		b.head = b.head[n:]
		return n, nil
	}
	return 0, b.err
}

// TestHygieneBodyReadErrors: a policy body that cannot be read is 413
// only when it is over the bound; a read that timed out is 408, one cut
// short 400, and one that is not UTF-8 400 (JSON would have turned its
// bad bytes into U+FFFD), on every endpoint sharing the body reader, and
// no answer names the client's address.
func TestHygieneBodyReadErrors(t *testing.T) {
	f := newFixture(t)
	defer f.stop()
	h := f.s.Handler()
	paths := []string{api.PathPolicy, PathBudgets, PathRunaway, api.PathFreshnessPolicy, api.PathAutopilot, PathAutopilotPolicy, api.PathPGSignal}
	for _, path := range paths {
		for _, c := range []struct {
			name string
			body io.Reader
			code int
			want string
		}{
			{"over the bound", bytes.NewReader(bytes.Repeat([]byte(" "), maxPolicyBody+1)), http.StatusRequestEntityTooLarge, "larger than 65536 bytes"},
			{"timed out", &failingBody{[]byte(`{"id":`), os.ErrDeadlineExceeded}, http.StatusRequestTimeout, "not received in time"},
			{"cut short", &failingBody{[]byte(`{"id":`), io.ErrUnexpectedEOF}, http.StatusBadRequest, "cut short or unreadable"},
			{"not UTF-8", strings.NewReader("{\"tenant\":\"ac\xff\xfeme\"}"), http.StatusBadRequest, "not UTF-8"},
		} {
			w := hygieneDo(h, http.MethodPost, path, f.token, c.body)
			if w.Code != c.code || !strings.Contains(w.Body.String(), c.want) {
				t.Errorf("POST %s, body %s: %d %s, want %d %q", path, c.name, w.Code, w.Body, c.code, c.want)
			}
			if strings.Contains(w.Body.String(), "192.0.2.1") {
				t.Errorf("POST %s, body %s: the answer names the client's address: %s", path, c.name, w.Body)
			}
		}
	}
}

// TestHygieneJSONNumberOutOfRange: a number no float holds is refused
// naming the field and what it wants, without Go's type names.
func TestHygieneJSONNumberOutOfRange(t *testing.T) {
	f := newFixture(t)
	defer f.stop()
	h := f.s.Handler()
	body := `{"tenant":"acme","action":"throttle","ru_per_second":1e999,"reason":"x","expires":"` + t0.Add(1e12).Format("2006-01-02T15:04:05Z") + `"}`
	w := hygieneDo(h, http.MethodPost, api.PathPolicy, f.token, strings.NewReader(body))
	msg := w.Body.String()
	if w.Code != http.StatusBadRequest || !strings.Contains(msg, "ru_per_second") || !strings.Contains(msg, "1e999") || !strings.Contains(msg, "finite number") {
		t.Fatalf("ru_per_second 1e999: %d %s", w.Code, msg)
	}
	for _, goName := range []string{"Go struct", "float64", "Rule."} {
		if strings.Contains(msg, goName) {
			t.Errorf("the answer names Go's %q: %s", goName, msg)
		}
	}
}

// TestHygieneBodyNotOneObject: on every admin door a body that is not
// one JSON object — empty, null, a list, a string, a number, true, an
// object with something after it, one cut short, not JSON — is a 400 that
// says to send one object and shows one, never "EOF", and changes
// nothing: a null autopilot or freshness body used to be read as the
// empty part and replace the rules.
func TestHygieneBodyNotOneObject(t *testing.T) {
	f := newFixture(t)
	defer f.stop()
	h := f.s.Handler()
	for path, body := range map[string]string{
		PathAutopilotPolicy:     `{"paused":true,"allow":["acme"]}`,
		api.PathFreshnessPolicy: `{"rules":[{"id":"reload-10s","cause":"generic-reload","max_app_age_seconds":10}],"batch":1,"reason":"payday"}`,
	} {
		if w := hygieneDo(h, http.MethodPost, path, f.token, strings.NewReader(body)); w.Code != http.StatusOK {
			t.Fatalf("POST %s %s: %d %s", path, body, w.Code, w.Body)
		}
	}
	before := f.s.Policy()
	paths := []string{api.PathPolicy, PathBudgets, PathRunaway, api.PathFreshnessPolicy, api.PathAutopilot, PathAutopilotPolicy, api.PathPGSignal}
	for _, path := range paths {
		for _, c := range []struct{ body, says string }{
			{"", "empty body"},
			{" \r\n\t", "empty body"},
			{"null", "is null"},
			{" null\n", "is null"},
			{"[]", "is a list"},
			{`[{"tenant":"acme"}]`, "is a list"},
			{`"acme"`, "is a string"},
			{"42", "is a number"},
			{"true", "is true"},
			{`{} x`, "data after the JSON object"},
			{`{}{}`, "data after the JSON object"},
			{`{} null`, "data after the JSON object"},
			{`{"tenant":`, "ends inside its JSON object"},
			{`"acme`, "ends inside a JSON value"},
			{"nope", "not JSON"},
		} {
			w := hygieneDo(h, http.MethodPost, path, f.token, strings.NewReader(c.body))
			msg := w.Body.String()
			if w.Code != http.StatusBadRequest || !strings.Contains(msg, c.says) || !strings.Contains(msg, "send one JSON object, e.g. {") {
				t.Errorf("POST %s, body %q: %d %s, want 400 saying %q and showing an object", path, c.body, w.Code, msg, c.says)
			}
			if strings.Contains(msg, "EOF") {
				t.Errorf("POST %s, body %q: the answer says EOF: %s", path, c.body, msg)
			}
		}
	}
	after := f.s.Policy()
	if after.Version != before.Version || !reflect.DeepEqual(after.Autopilot, before.Autopilot) || !reflect.DeepEqual(after.Freshness, before.Freshness) {
		t.Fatalf("refused bodies changed the policy:\nbefore %+v\nafter  %+v", before, after)
	}
	// {} is an object: the autopilot's part with no rules, said on purpose.
	if w := hygieneDo(h, http.MethodPost, PathAutopilotPolicy, f.token, strings.NewReader(`{}`)); w.Code != http.StatusOK {
		t.Fatalf("POST %s {}: %d %s", PathAutopilotPolicy, w.Code, w.Body)
	}
}

// TestHygieneListDeleteKeyTwice: a delete on a list door is refused when
// a key appears twice, as any other body is: it used to go through a map
// that kept the last "id" and deleted the budget the sender did not read
// first.
func TestHygieneListDeleteKeyTwice(t *testing.T) {
	f := newFixture(t)
	defer f.stop()
	h := f.s.Handler()
	add := `{"id":"a","match":[{"tenant":"x"}],"concurrency":1,"reason":"r"}`
	if w := hygieneDo(h, http.MethodPost, PathBudgets, f.token, strings.NewReader(add)); w.Code != http.StatusOK {
		t.Fatalf("add: %d %s", w.Code, w.Body)
	}
	w := hygieneDo(h, http.MethodPost, PathBudgets, f.token, strings.NewReader(`{"id":"b","id":"a","delete":true}`))
	if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "appears twice") {
		t.Fatalf("delete with id twice: %d %s", w.Code, w.Body)
	}
	if b := f.s.Policy().Budgets; len(b) != 1 || b[0].ID != "a" {
		t.Fatalf("budgets after a refused delete: %+v", b)
	}
}
