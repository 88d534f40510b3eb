package agent

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestStreamingGivesBackItsSlot: with one slot, a request that declared
// itself a stream no longer holds it, so the next request is served while
// the stream is still open.
func TestStreamingGivesBackItsSlot(t *testing.T) {
	a, err := New(WithTenant(FromHeader("X-Tenant", "")), WithSlots(1))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Shutdown(t.Context())
	streaming, release := make(chan struct{}), make(chan struct{})
	srv := httptest.NewServer(a.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/stream" {
			// S
			Streaming(r.Context()) // a second call does nothing
			close(streaming)
			<-release
		}
		io.WriteString(w, "ok")
	})))
	defer srv.Close()
	defer func() {
		select {
		case <-release:
		default:
			close(release) // a failed test lets the handler go
		}
	}()
	get := func(path string) (int, error) {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		req.Header.Set("X-Tenant", "acme")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	done := make(chan error, 1)
	go func() { _, err := get("/stream"); done <- err }()
	<-streaming
	if code, err := get("/next"); err != nil || code != 200 {
		t.Fatalf("next request while the stream is open: %d %v", code, err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	Streaming(t.Context()) // outside Handler: nothing
	http.DefaultClient.CloseIdleConnections()
}
