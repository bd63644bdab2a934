package otc_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/mcpotc/mcpotc/otc"
	"github.com/mcpotc/mcpotc/otc/otcsample"
)

// wireMarker is how one call to the server was written: its $schema ("" for
// a bare request) and its OXP-Version header.
type wireMarker struct{ Schema, Version string }

// sampleServer serves the sample toolkit and records the marker of each call.
func sampleServer(t *testing.T, opts *otc.Options) (*httptest.Server, func() []wireMarker) {
	t.Helper()
	h, err := otcsample.New(nil).Handler(opts)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var markers []wireMarker
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/tools/call" {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			var env struct {
				Schema string `json:"$schema"`
			}
			_ = json.Unmarshal(body, &env)
			mu.Lock()
			markers = append(markers, wireMarker{env.Schema, r.Header.Get(otc.VersionHeader)})
			mu.Unlock()
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, func() []wireMarker {
		mu.Lock()
		defer mu.Unlock()
		return append([]wireMarker(nil), markers...)
	}
}

func TestClientAgainstSampleServer(t *testing.T) {
	for _, tc := range []struct {
		dialect otc.Dialect
		learned otc.Dialect
		wire    wireMarker
	}{
		{otc.DialectOTC10, otc.DialectOTC10, wireMarker{Schema: otc.SchemaOTC10}},
		{otc.DialectOXP10, otc.DialectOXP10, wireMarker{Schema: otc.SchemaOXP10}},
		{otc.DialectOXPFlat, otc.DialectOXPFlat, wireMarker{Version: otc.HeaderVersion10}},
		// The server lists {"$schema":"urn:oxp:1.0","tools","items"} to a caller that sends no OXP-Version.
		{otc.DialectAuto, otc.DialectOXP10, wireMarker{Schema: otc.SchemaOXP10}},
	} {
		t.Run(string(tc.dialect), func(t *testing.T) {
			srv, markers := sampleServer(t, nil)
			c, err := otc.NewClient(srv.URL, &otc.ClientOptions{Dialect: tc.dialect})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			call := func(id, input string, cc *otc.CallContext) (*otc.CallToolResponse, error) {
				return c.Call(ctx, &otc.CallToolRequest{ToolID: id, Input: json.RawMessage(input), Context: cc})
			}

			// Auto learns from the first call's listing.
			resp, err := call("Calculator.Add@1.0.0", `{"a":10,"b":5}`, nil)
			if err != nil || !resp.Success || string(resp.Value) != "15" || resp.CallID == "" {
				t.Fatalf("Add 10+5: %+v, %v", resp, err)
			}
			if d := c.Dialect(); d != tc.learned {
				t.Errorf("Dialect = %q, want %q", d, tc.learned)
			}

			resp, err = call("Calculator.Add@1.0.0", `{"a":12345678901234567890123,"b":1}`, nil)
			if err != nil || string(resp.Value) != "12345678901234567890124" {
				t.Errorf("big sum: %+v (value %s), %v", resp, resp.Value, err)
			}

			_, err = call("Calculator.Add@2.0.0", `{"a":10,"b":5}`, nil)
			var se *otc.StatusError
			if !errors.Is(err, otc.ErrBadRequest) || !errors.As(err, &se) || se.Message != "Tool 'Calculator.Add@2.0.0' was not found" {
				t.Errorf("unavailable version: %v", err)
			}

			_, err = call("Calculator.Add@1.0.0", `{"a":10,"b":"infinity"}`, nil)
			if !errors.Is(err, otc.ErrValidation) || !errors.As(err, &se) || se.ParameterErrors["b"] != "Must be a number" {
				t.Errorf("bad input: %v (%+v)", err, se)
			}

			resp, err = call("Doorbell.Ring@0.1.0", `{"doorbell_id":"doorbell1"}`, nil)
			retry := int64(500)
			wantErr := &otc.ToolError{
				Message:                 "Doorbell ID not found",
				DeveloperMessage:        "The doorbell with ID 'doorbell1' does not exist.",
				CanRetry:                true,
				AdditionalPromptContent: "ids: doorbell42,doorbell84",
				RetryAfterMS:            &retry,
			}
			if err != nil || resp.Success || resp.Value != nil || !reflect.DeepEqual(resp.Error, wantErr) {
				t.Errorf("unknown doorbell: %+v, %v", resp, err)
			}
			resp, err = call("Doorbell.Ring", `{"doorbell_id":"doorbell42"}`, nil)
			if err != nil || !resp.Success || string(resp.Value) != "null" {
				t.Errorf("known doorbell: %+v, %v", resp, err)
			}

			_, err = call("Gmail.GetEmails@1.2.0", `{}`, nil)
			if !errors.Is(err, otc.ErrBadRequest) || !errors.As(err, &se) || se.MissingRequirements == nil ||
				len(se.MissingRequirements.Authorization) != 1 ||
				!strings.HasPrefix(se.MissingRequirements.Authorization[0].URL, srv.URL+otcsample.AuthorizePath) ||
				se.MissingRequirements.Authorization[0].CheckURL == "" {
				t.Errorf("gmail without token: %v (%+v)", err, se)
			}
			resp, err = call("Gmail.GetEmails@1.2.0", `{}`, &otc.CallContext{Authorization: []otc.AuthorizationToken{{ID: "google", Token: "t"}}})
			if err != nil || !resp.Success || !strings.Contains(string(resp.Value), `"emails"`) {
				t.Errorf("gmail with token: %+v, %v", resp, err)
			}

			tools, err := c.ListTools(ctx)
			if err != nil || len(tools) != 6 {
				t.Fatalf("ListTools: %d tools, %v", len(tools), err)
			}
			for _, tool := range tools {
				if tool.ID == "Doorbell.Ring@0.1.0" && string(tool.OutputSchema) != "null" {
					t.Errorf("Doorbell output_schema = %s, want null", tool.OutputSchema)
				}
			}
			if err := c.Health(ctx); err != nil {
				t.Errorf("Health: %v", err)
			}

			for _, m := range markers() {
				if m != tc.wire {
					t.Errorf("a call went out as %+v, want %+v", m, tc.wire)
				}
			}
		})
	}
}

func TestClientSampleServerAPIKey(t *testing.T) {
	srv, _ := sampleServer(t, &otc.Options{APIKey: "sample-key"})
	ctx := context.Background()
	for key, wantErr := range map[string]error{"": otc.ErrUnauthorized, "wrong": otc.ErrUnauthorized, "sample-key": nil} {
		c, err := otc.NewClient(srv.URL, &otc.ClientOptions{APIKey: key})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.ListTools(ctx); !errors.Is(err, wantErr) {
			t.Errorf("key %q: ListTools err = %v, want %v", key, err, wantErr)
		}
	}
}
