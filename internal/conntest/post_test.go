package conntest

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestPost(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.Method != http.MethodPost || r.URL.Path != "/call" || r.Host != "api.example" ||
			r.Header.Get("Content-Type") != "application/json" || r.Header.Get("Host") != "" || string(body) != `{"a":1}` {
			t.Errorf("the server got %s %s Host %q, header %v, body %q", r.Method, r.URL.Path, r.Host, r.Header, body)
		}
		w.Header().Set("X-Answer", "yes")
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, "done")
	}))
	defer srv.Close()
	status, header, body, err := Post(context.Background(), srv.URL+"/call",
		map[string]string{"Content-Type": "application/json", "Host": "api.example"}, []byte(`{"a":1}`))
	if err != nil || status != http.StatusCreated || header.Get("X-Answer") != "yes" || string(body) != "done" {
		t.Errorf("Post: %v %d %v %q", err, status, header, body)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, _, err := Post(ctx, srv.URL, nil, nil); err == nil {
		t.Error("Post with an ended context: no error")
	}
}
