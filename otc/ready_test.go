package otc

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"
)

// GET /ready answers Options.Ready, or Health's answer without it; 405 for
// other methods.
func TestReadyProbe(t *testing.T) {
	health := func(context.Context) (bool, any) { return false, map[string]string{"status": "unavailable"} }
	ready := func(context.Context) (bool, any) { return true, map[string]string{"status": "ok"} }
	for _, tc := range []struct {
		name   string
		opts   Options
		status int
		body   string
	}{
		{"neither", Options{}, 200, `{"status":"ok"}`},
		{"health only", Options{Health: health}, 503, `{"status":"unavailable"}`},
		{"both", Options{Health: health, Ready: ready}, 200, `{"status":"ok"}`},
	} {
		h, err := NewHandler(nil, &tc.opts)
		if err != nil {
			t.Fatal(err)
		}
		status, _, got := do(t, h, "GET", "/ready", nil, "")
		var want map[string]any
		_ = json.Unmarshal([]byte(tc.body), &want)
		if body := got; status != tc.status || !reflect.DeepEqual(body, want) {
			t.Errorf("%s: GET /ready = %d %s, want %d %s", tc.name, status, body, tc.status, tc.body)
		}
	}
	h, _ := NewHandler(nil, nil)
	if status, hdr, _ := do(t, h, "POST", "/ready", nil, ""); status != 405 || hdr.Get("Allow") != "GET" {
		t.Errorf("POST /ready = %d, Allow %q", status, hdr.Get("Allow"))
	}
}
