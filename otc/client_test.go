package otc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpotc/mcpotc/internal/conntest"
)

// exchange is one request a fake server received.
type exchange struct {
	Method, Path, Query string
	Header              http.Header
	Body                []byte
}

// fakeServer records every request it receives, then lets answer reply.
type fakeServer struct {
	*httptest.Server
	mu  sync.Mutex
	got []exchange
}

func newFakeServer(t *testing.T, answer http.HandlerFunc) *fakeServer {
	t.Helper()
	f := &fakeServer{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.got = append(f.got, exchange{r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Clone(), body})
		f.mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(body))
		answer(w, r)
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeServer) received(method, path string) []exchange {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []exchange
	for _, e := range f.got {
		if e.Method == method && e.Path == path {
			out = append(out, e)
		}
	}
	return out
}

// answerWith replies with status, body and header pairs.
func answerWith(status int, body string, header ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Set(header[i], header[i+1])
		}
		w.WriteHeader(status)
		io.WriteString(w, body)
	}
}

func newTestClient(t *testing.T, base string, opts *ClientOptions) *Client {
	t.Helper()
	c, err := NewClient(base, opts)
	if err != nil {
		t.Fatalf("NewClient(%q): %v", base, err)
	}
	return c
}

// decodeJSON decodes with numbers kept as written, for comparisons as data.
func decodeJSON(t *testing.T, data []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, data)
	}
	return v
}

func assertJSONEqual(t *testing.T, what string, got []byte, want string) {
	t.Helper()
	if g, w := decodeJSON(t, got), decodeJSON(t, []byte(want)); !reflect.DeepEqual(g, w) {
		t.Errorf("%s:\n got %s\nwant %s", what, got, want)
	}
}

// sentInput returns the raw input of a call body in any dialect, failing
// when the body carries "inputs".
func sentInput(t *testing.T, body []byte) json.RawMessage {
	t.Helper()
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		t.Fatalf("call body is not an object: %v\n%s", err, body)
	}
	if req, ok := top["request"]; ok {
		if _, bad := top["inputs"]; bad {
			t.Errorf("envelope carries inputs: %s", body)
		}
		top = nil
		if err := json.Unmarshal(req, &top); err != nil {
			t.Fatalf("request is not an object: %v", err)
		}
	}
	if _, bad := top["inputs"]; bad {
		t.Errorf("call body carries inputs: %s", body)
	}
	return top["input"]
}

const (
	bigInput = `{"a":12345678901234567890123,"b":15}`
	bigSum   = `12345678901234567890138`
)

func bigCall() *CallToolRequest {
	return &CallToolRequest{ToolID: "Calculator.Add@1.0.0", CallID: "call-1", Input: json.RawMessage(bigInput)}
}

var wantBigResponse = &CallToolResponse{CallID: "call-1", Duration: 1.5, Success: true, Value: json.RawMessage(bigSum)}

// One fake server per dialect: what it lists, what it answers to a call,
// and what a client must send it.
var dialectCases = []struct {
	name       string
	configured Dialect // the dialect to set explicitly for this server
	learned    Dialect // what auto must learn
	flat       bool    // the server answers with OXP-Version
	list       string
	call       string
	wantTools  string // []ToolDefinition as JSON
	wantSent   string // the call body the server must receive
}{
	{
		name: "otc-1.0", configured: DialectOTC10, learned: DialectOTC10,
		list: `{"$schema":"otc://1.0","tools":[{"id":"Calculator.Add@1.0.0","name":"Calculator_Add","description":"Adds.","version":"1.0.0",
			"input_schema":{"parameters":{"type":"object","properties":{"a":{"type":"number","description":"A."}}}},"output_schema":{"type":"number"}}]}`,
		call: `{"$schema":"otc://1.0","result":{"call_id":"call-1","duration":1.5,"success":true,"value":` + bigSum + `}}`,
		wantTools: `[{"id":"Calculator.Add@1.0.0","name":"Calculator_Add","description":"Adds.","version":"1.0.0",
			"input_schema":{"parameters":{"type":"object","properties":{"a":{"type":"number","description":"A."}}}},"output_schema":{"type":"number"}}]`,
		wantSent: `{"$schema":"otc://1.0","request":{"tool_id":"Calculator.Add@1.0.0","call_id":"call-1","input":` + bigInput + `}}`,
	},
	{
		name: "oxp-1.0", configured: DialectOXP10, learned: DialectOXP10,
		list: `{"$schema":"urn:oxp:1.0","items":[{"id":"Calculator.Add@1.0.0","name":"Calculator_Add","description":"Adds.","version":"1.0.0",
			"input_schema":{"type":"object"},"output_schema":null,"requirements":{"secrets":[{"id":"K"}]}}]}`,
		call: `{"$schema":"urn:oxp:1.0","result":{"call_id":"call-1","duration":1.5,"success":true,"value":` + bigSum + `}}`,
		wantTools: `[{"id":"Calculator.Add@1.0.0","name":"Calculator_Add","description":"Adds.","version":"1.0.0",
			"input_schema":{"type":"object"},"output_schema":null,"requirements":{"secrets":[{"id":"K"}]}}]`,
		wantSent: `{"$schema":"urn:oxp:1.0","request":{"tool_id":"Calculator.Add@1.0.0","call_id":"call-1","input":` + bigInput + `}}`,
	},
	{
		name: "oxp-flat", configured: DialectOXPFlat, learned: DialectOXPFlat, flat: true,
		list:      `{"items":[{"id":"Calculator.Add@1.0.0","name":"Calculator_Add","description":"Adds.","version":"1.0.0","input_schema":{"type":"object"},"output_schema":{}}]}`,
		call:      `{"call_id":"call-1","duration":1.5,"success":true,"value":` + bigSum + `}`,
		wantTools: `[{"id":"Calculator.Add@1.0.0","name":"Calculator_Add","description":"Adds.","version":"1.0.0","input_schema":{"type":"object"},"output_schema":{}}]`,
		wantSent:  `{"tool_id":"Calculator.Add@1.0.0","call_id":"call-1","input":` + bigInput + `}`,
	},
	{
		name: "loose", configured: DialectLoose, learned: DialectLoose,
		list:      `[{"id":"Calculator.Add@1.0.0","name":"Calculator_Add","description":"Adds.","input_schema":{"type":"object"}}]`,
		call:      `{"call_id":"call-1","duration":1.5,"success":true,"value":` + bigSum + `}`,
		wantTools: `[{"id":"Calculator.Add@1.0.0","name":"Calculator_Add","description":"Adds.","version":"1.0.0","input_schema":{"type":"object"}}]`,
		wantSent:  `{"$schema":"urn:oxp:1.0","request":{"tool_id":"Calculator.Add@1.0.0","call_id":"call-1","input":` + bigInput + `}}`,
	},
	{
		name: "rfc-draft", configured: DialectOTC10, learned: DialectOTC10,
		list: `{"$schema":"https://github.com/ArcadeAI/OpenToolCalling/blob/main/specification/http/1.0/openapi.json",
			"tools":[{"id":"Calculator.Add@1.0.0","name":"Calculator_Add","description":"Adds.",
			"input":{"parameters":{"type":"object"}},"output":{"available_modes":["value"],"value":{"type":"number"}}}]}`,
		call: `{"$schema":"https://github.com/ArcadeAI/OpenToolCalling/blob/main/specification/http/1.0/openapi.json",
			"response":{"execution_id":"call-1","duration":1.5,"success":true,"output":{"value":` + bigSum + `}}}`,
		wantTools: `[{"id":"Calculator.Add@1.0.0","name":"Calculator_Add","description":"Adds.","version":"1.0.0",
			"input_schema":{"parameters":{"type":"object"}},"output_schema":{"type":"number"}}]`,
		wantSent: `{"$schema":"otc://1.0","request":{"tool_id":"Calculator.Add@1.0.0","call_id":"call-1","input":` + bigInput + `}}`,
	},
}

func TestClientDialects(t *testing.T) {
	for _, tc := range dialectCases {
		serve := func(t *testing.T) *fakeServer {
			return newFakeServer(t, func(w http.ResponseWriter, r *http.Request) {
				if tc.flat {
					w.Header().Set(VersionHeader, "1.0")
				}
				w.Header().Set("Content-Type", "application/json")
				switch r.Method + " " + r.URL.Path {
				case "GET /tools":
					io.WriteString(w, tc.list)
				case "POST /tools/call":
					io.WriteString(w, tc.call)
				default:
					w.WriteHeader(http.StatusNotFound)
				}
			})
		}
		// checkCall asserts what the server received for the one call and what Call returned.
		checkCall := func(t *testing.T, srv *fakeServer, resp *CallToolResponse, flat bool) {
			t.Helper()
			if !reflect.DeepEqual(resp, wantBigResponse) {
				t.Errorf("response = %+v (value %s), want %+v", resp, resp.Value, wantBigResponse)
			}
			calls := srv.received(http.MethodPost, "/tools/call")
			if len(calls) != 1 {
				t.Fatalf("server received %d calls, want 1", len(calls))
			}
			got := calls[0]
			assertJSONEqual(t, "call body", got.Body, tc.wantSent)
			if in := sentInput(t, got.Body); string(in) != bigInput {
				t.Errorf("input bytes = %s, want %s", in, bigInput)
			}
			if ct := got.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type = %q", ct)
			}
			if v, want := got.Header.Get(VersionHeader), map[bool]string{true: "1.0"}[flat]; v != want {
				t.Errorf("call %s header = %q, want %q", VersionHeader, v, want)
			}
		}
		// checkTools lists c's tools and asserts what ListTools returned.
		checkTools := func(t *testing.T, c *Client) {
			t.Helper()
			tools, err := c.ListTools(context.Background())
			if err != nil {
				t.Fatalf("ListTools: %v", err)
			}
			got, _ := json.Marshal(tools)
			assertJSONEqual(t, "tools", got, tc.wantTools)
		}

		t.Run(tc.name+"/auto", func(t *testing.T) {
			srv := serve(t)
			c := newTestClient(t, srv.URL, nil)
			if d := c.Dialect(); d != DialectAuto {
				t.Errorf("Dialect before listing = %q, want auto", d)
			}
			checkTools(t, c)
			if d := c.Dialect(); d != tc.learned {
				t.Errorf("learned %q, want %q", d, tc.learned)
			}
			if v := srv.received(http.MethodGet, "/tools")[0].Header.Get(VersionHeader); v != "" {
				t.Errorf("auto sent %s: %q on GET /tools", VersionHeader, v)
			}
			resp, err := c.Call(context.Background(), bigCall())
			if err != nil {
				t.Fatalf("Call: %v", err)
			}
			checkCall(t, srv, resp, tc.learned == DialectOXPFlat)
		})

		t.Run(tc.name+"/auto-call-first", func(t *testing.T) {
			srv := serve(t)
			c := newTestClient(t, srv.URL, &ClientOptions{Dialect: DialectAuto})
			resp, err := c.Call(context.Background(), bigCall())
			if err != nil {
				t.Fatalf("Call: %v", err)
			}
			if n := len(srv.received(http.MethodGet, "/tools")); n != 1 {
				t.Errorf("GET /tools %d times before the call, want 1", n)
			}
			if d := c.Dialect(); d != tc.learned {
				t.Errorf("learned %q, want %q", d, tc.learned)
			}
			checkCall(t, srv, resp, tc.learned == DialectOXPFlat)
		})

		t.Run(tc.name+"/configured", func(t *testing.T) {
			srv := serve(t)
			c := newTestClient(t, srv.URL, &ClientOptions{Dialect: tc.configured})
			resp, err := c.Call(context.Background(), bigCall())
			if err != nil {
				t.Fatalf("Call: %v", err)
			}
			if n := len(srv.received(http.MethodGet, "/tools")); n != 0 {
				t.Errorf("a configured dialect listed tools %d times", n)
			}
			checkCall(t, srv, resp, tc.configured == DialectOXPFlat)
			checkTools(t, c)
			if d := c.Dialect(); d != tc.configured {
				t.Errorf("Dialect = %q after listing, want the configured %q", d, tc.configured)
			}
			want := map[bool]string{true: "1.0"}[tc.configured == DialectOXPFlat]
			if v := srv.received(http.MethodGet, "/tools")[0].Header.Get(VersionHeader); v != want {
				t.Errorf("GET /tools %s = %q, want %q", VersionHeader, v, want)
			}
		})
	}
}

func TestDecodeToolList(t *testing.T) {
	tool := `{"id":"A.B@1.2.3","name":"A_B","description":"d","version":"1.2.3"}`
	tests := []struct {
		name, body string
		header     string // OXP-Version answered
		want       Dialect
	}{
		{"header wins", `{"$schema":"urn:oxp:1.0","tools":[` + tool + `],"items":[` + tool + `]}`, "1.0", DialectOXPFlat},
		{"items only", `{"items":[` + tool + `]}`, "", DialectOXPFlat},
		{"tools only", `{"tools":[` + tool + `]}`, "", DialectOTC10},
		{"tools and items", `{"tools":[` + tool + `],"items":[` + tool + `]}`, "", DialectOXP10},
		{"otc schema", `{"$schema":"otc://1.0","items":[` + tool + `]}`, "", DialectOTC10},
		{"oxp schema", `{"$schema":"urn:oxp:1.0","tools":[` + tool + `]}`, "", DialectOXP10},
		{"OpenExecProtocol URL", `{"$schema":"https://github.com/OpenExecProtocol/Specification/blob/main/spec/http/1.0/openapi.json","tools":[` + tool + `]}`, "", DialectOXP10},
		{"OpenToolCalling URL", `{"$schema":"https://github.com/OpenToolCalling/Specification/blob/main/spec/http/1.0/openapi.json","items":[` + tool + `]}`, "", DialectOTC10},
		{"unknown schema falls back to keys", `{"$schema":"otc://9","items":[` + tool + `]}`, "", DialectOXPFlat},
		{"bare array", ` [` + tool + `] `, "", DialectLoose},
		{"tools null, items given", `{"tools":null,"items":[` + tool + `]}`, "", DialectOXP10},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			if tc.header != "" {
				h.Set(VersionHeader, tc.header)
			}
			tools, d, err := decodeToolList([]byte(tc.body), h)
			if err != nil {
				t.Fatal(err)
			}
			if d != tc.want {
				t.Errorf("dialect %q, want %q", d, tc.want)
			}
			if len(tools) != 1 || tools[0].ID != "A.B@1.2.3" || tools[0].Version != "1.2.3" {
				t.Errorf("tools = %+v", tools)
			}
		})
	}

	if tools, d, err := decodeToolList([]byte(`{"tools":null}`), http.Header{}); err != nil || len(tools) != 0 || d != DialectOTC10 {
		t.Errorf("tools null: %v, %q, %v", tools, d, err)
	}

	t.Run("definitions", func(t *testing.T) {
		body := `{"tools":[
			{"id":"A.Plain@1.0.0","input_schema": {"type": "object"}},
			{"id":"A.Wrapped@2","input_schema": {"parameters": {"type": "object"}}, "output_schema": null},
			{"id":"A.Any","version":"3.1.4","output_schema": {}},
			{"id":"A.Rfc@0.1.0","input":{"parameters": {"type": "object"}},"output":{"value": {"type": "string"}}},
			{"id":"A.Both@1.0.0","input_schema":{"type":"object"},"input":{"parameters":{"type":"string"}}}
		]}`
		tools, _, err := decodeToolList([]byte(body), http.Header{})
		if err != nil {
			t.Fatal(err)
		}
		type raw struct{ version, in, out string }
		want := []raw{
			{"1.0.0", `{"type": "object"}`, "<absent>"},
			{"2.0.0", `{"parameters": {"type": "object"}}`, "null"},
			{"3.1.4", "<absent>", "{}"},
			{"0.1.0", `{"parameters":{"type": "object"}}`, `{"type": "string"}`},
			{"1.0.0", `{"type":"object"}`, "<absent>"},
		}
		show := func(m json.RawMessage) string {
			if m == nil {
				return "<absent>"
			}
			return string(m)
		}
		for i, w := range want {
			got := raw{tools[i].Version, show(tools[i].InputSchema), show(tools[i].OutputSchema)}
			if got != w {
				t.Errorf("%s: got %+v, want %+v", tools[i].ID, got, w)
			}
		}
	})

	for _, body := range []string{``, `null`, `{}`, `{"foo":[]}`, `{"tools":"x"}`, `[1]`, `{"tools":[]} {}`, `<html>`, `{"items":[{"id":7}]}`} {
		t.Run("malformed "+body, func(t *testing.T) {
			_, _, err := decodeToolList([]byte(body), http.Header{})
			if !errors.Is(err, ErrMalformedResponse) {
				t.Errorf("err = %v, want ErrMalformedResponse", err)
			}
			var se *StatusError
			if errors.As(err, &se) {
				t.Errorf("a malformed 200 is a StatusError: %v", err)
			}
		})
	}
}

func TestDecodeCallResponse(t *testing.T) {
	retry := int64(500)
	tests := []struct {
		name, body string
		want       *CallToolResponse
	}{
		{"bare value", `{"call_id":"c","duration":2,"success":true,"value":{"sum":15}}`,
			&CallToolResponse{CallID: "c", Duration: 2, Success: true, Value: json.RawMessage(`{"sum":15}`)}},
		{"value null", `{"call_id":"c","success":true,"value":null}`,
			&CallToolResponse{CallID: "c", Success: true, Value: json.RawMessage(`null`)}},
		{"value absent", `{"call_id":"c","success":true}`,
			&CallToolResponse{CallID: "c", Success: true}},
		{"big number and float kept as written", `{"call_id":"c","success":true,"value":[123456789012345678901234567890, 1.10]}`,
			&CallToolResponse{CallID: "c", Success: true, Value: json.RawMessage(`[123456789012345678901234567890, 1.10]`)}},
		{"result envelope", `{"$schema":"urn:oxp:1.0","result":{"call_id":"c","success":true,"value":"x"}}`,
			&CallToolResponse{CallID: "c", Success: true, Value: json.RawMessage(`"x"`)}},
		{"tool error", `{"$schema":"otc://1.0","result":{"call_id":"c","success":false,"error":{"message":"m","developer_message":"d","can_retry":true,"additional_prompt_content":"p","retry_after_ms":500}}}`,
			&CallToolResponse{CallID: "c", Error: &ToolError{Message: "m", DeveloperMessage: "d", CanRetry: true, AdditionalPromptContent: "p", RetryAfterMS: &retry}}},
		{"rfc output.value", `{"response":{"execution_id":"e","duration":1,"success":true,"output":{"value":null}}}`,
			&CallToolResponse{CallID: "e", Duration: 1, Success: true, Value: json.RawMessage(`null`)}},
		{"rfc output.error, success inferred", `{"execution_id":"e","output":{"error":{"message":"m"}}}`,
			&CallToolResponse{CallID: "e", Error: &ToolError{Message: "m"}}},
		{"rfc output.value, success inferred", `{"execution_id":"e","output":{"value":1}}`,
			&CallToolResponse{CallID: "e", Success: true, Value: json.RawMessage(`1`)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := decodeCallResponse([]byte(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v (value %q), want %+v (value %q)", got, got.Value, tc.want, tc.want.Value)
			}
		})
	}
	for _, body := range []string{``, `not json`, `{}`, `[]`, `{"result":null}`, `{"success":true} trailing`, `{"success":true,"duration":"1ms"}`, `{"status":"ok"}`} {
		t.Run("malformed "+body, func(t *testing.T) {
			_, err := decodeCallResponse([]byte(body))
			if !errors.Is(err, ErrMalformedResponse) {
				t.Errorf("err = %v, want ErrMalformedResponse", err)
			}
		})
	}
}

var errorClasses = []error{ErrBadRequest, ErrUnauthorized, ErrValidation, ErrServerFailure}

func TestClientStatusErrors(t *testing.T) {
	tests := []struct {
		name   string
		status int
		body   string
		class  error // nil: no class
		want   StatusError
	}{
		{"400 server error with $schema", 400, `{"$schema":"urn:oxp:1.0","message":"Tool 'X' was not found","developer_message":"no tool X is served"}`,
			ErrBadRequest, StatusError{Message: "Tool 'X' was not found", DeveloperMessage: "no tool X is served"}},
		{"400 missing requirements", 400, `{"message":"Authorization is required","missing_requirements":{"authorization":[{"id":"google","url":"https://auth.example/a","check_url":"https://auth.example/c"}],"secrets":[{"id":"K"}],"user_id":true}}`,
			ErrBadRequest, StatusError{Message: "Authorization is required", MissingRequirements: &MissingRequirements{
				Authorization: []ToolAuthorizationChallenge{{ID: "google", URL: "https://auth.example/a", CheckURL: "https://auth.example/c"}},
				Secrets:       []SecretRequirement{{ID: "K"}},
				UserID:        true,
			}}},
		{"400 FastAPI detail list (loose bad input)", 400, `{"detail":[{"loc":["body","request","input","b"],"msg":"Input should be a valid number","type":"float_parsing"},{"loc":["body","request","input",0],"msg":"odd"}]}`,
			ErrBadRequest, StatusError{Message: "Some input parameters are invalid: 0: odd; b: Input should be a valid number",
				ParameterErrors: map[string]string{"b": "Input should be a valid number", "0": "odd"}}},
		{"400 member of a wrong type spoils nothing else", 400, `{"message":"m","parameter_errors":"oops","missing_requirements":7}`,
			ErrBadRequest, StatusError{Message: "m"}},
		{"401", 401, `{"message":"Unauthorized: the API key is not valid"}`,
			ErrUnauthorized, StatusError{Message: "Unauthorized: the API key is not valid"}},
		{"403 plain text", 403, `forbidden`, ErrUnauthorized, StatusError{}},
		{"404 FastAPI detail string (loose unknown tool)", 404, `{"detail":"Tool not found: Nope.Nope"}`,
			ErrBadRequest, StatusError{Message: "Tool not found: Nope.Nope"}},
		{"409", 409, `{}`, ErrBadRequest, StatusError{}},
		{"422 validation with $schema", 422, `{"$schema":"otc://1.0","message":"Some input parameters are invalid: b: Must be a number","parameter_errors":{"b":"Must be a number"}}`,
			ErrValidation, StatusError{Message: "Some input parameters are invalid: b: Must be a number", ParameterErrors: map[string]string{"b": "Must be a number"}}},
		{"422 FastAPI detail list", 422, `{"detail":[{"loc":["body","b"],"msg":"bad"}]}`,
			ErrValidation, StatusError{Message: "Some input parameters are invalid: b: bad", ParameterErrors: map[string]string{"b": "bad"}}},
		{"500 html", 500, `<html>oops</html>`, ErrServerFailure, StatusError{}},
		{"503", 503, `{"message":"not ready"}`, ErrServerFailure, StatusError{Message: "not ready"}},
		{"304 has no class", 304, ``, nil, StatusError{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := newFakeServer(t, answerWith(tc.status, tc.body, "Content-Type", "application/json"))
			c := newTestClient(t, srv.URL, &ClientOptions{Dialect: DialectOXP10})
			_, err := c.Call(context.Background(), bigCall())
			var se *StatusError
			if !errors.As(err, &se) {
				t.Fatalf("err = %v, want a *StatusError", err)
			}
			want := tc.want
			want.StatusCode, want.Body = tc.status, []byte(tc.body)
			if len(want.Body) == 0 {
				want.Body = []byte{}
			}
			if !reflect.DeepEqual(*se, want) {
				t.Errorf("got  %#v\nwant %#v", *se, want)
			}
			for _, class := range errorClasses {
				if got := errors.Is(err, class); got != (class == tc.class) {
					t.Errorf("errors.Is(err, %v) = %v", class, got)
				}
			}
			if errors.Is(err, ErrMalformedResponse) {
				t.Error("a status error is ErrMalformedResponse")
			}
			if !strings.Contains(err.Error(), fmt.Sprint(tc.status)) || !strings.Contains(err.Error(), tc.want.Message) {
				t.Errorf("Error() = %q: want the status and the message", err)
			}
		})
	}

	t.Run("body kept to 64 KiB", func(t *testing.T) {
		srv := newFakeServer(t, answerWith(500, strings.Repeat("x", 100<<10)))
		_, err := newTestClient(t, srv.URL, nil).ListTools(context.Background())
		var se *StatusError
		if !errors.As(err, &se) || len(se.Body) != 64<<10 || !errors.Is(err, ErrServerFailure) {
			t.Errorf("err = %v, want a 500 StatusError with a 64 KiB body", err)
		}
	})
}

func TestClientCredentialsAndHeaders(t *testing.T) {
	const key, token = "key-SECRET-1", "tok-SECRET-2"
	srv := newFakeServer(t, answerWith(401, `{"message":"Unauthorized","developer_message":"rejected `+key+` and `+token+`"}`))
	c := newTestClient(t, srv.URL, &ClientOptions{
		Dialect:     DialectOXP10,
		APIKey:      key,
		BearerToken: token,
		Header:      http.Header{"x-trace": {"t1"}, "Authorization": {"overridden"}, "Content-Type": {"text/plain"}},
	})
	_, err := c.Call(context.Background(), bigCall())
	if !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("err = %v, want ErrUnauthorized", err)
	}
	if strings.Contains(err.Error(), "SECRET") {
		t.Errorf("Error() leaks a secret: %q", err)
	}
	h := srv.received(http.MethodPost, "/tools/call")[0].Header
	for name, want := range map[string]string{
		"OXP-API-Key":   key,
		"Authorization": "Bearer " + token,
		"X-Trace":       "t1",
		"Content-Type":  "application/json",
		"Accept":        "application/json",
	} {
		if got := h.Values(name); len(got) != 1 || got[0] != want {
			t.Errorf("header %s = %q, want %q", name, got, want)
		}
	}

	// Without credentials configured, none is sent.
	srv2 := newFakeServer(t, answerWith(200, `{}`))
	if err := newTestClient(t, srv2.URL, nil).Health(context.Background()); err != nil {
		t.Fatal(err)
	}
	h = srv2.received(http.MethodGet, "/health")[0].Header
	if h.Get("Authorization") != "" || h.Get(APIKeyHeader) != "" || h.Get("Content-Type") != "" {
		t.Errorf("unexpected headers on a GET without credentials: %v", h)
	}
}

func TestClientNoCrossOriginRedirect(t *testing.T) {
	other := newFakeServer(t, answerWith(200, `{"tools":[]}`))
	srv := newFakeServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/tools" {
			http.Redirect(w, r, "/v1/tools", http.StatusFound) // same origin: followed
			return
		}
		http.Redirect(w, r, other.URL+"/tools", http.StatusFound)
	})
	c := newTestClient(t, srv.URL, &ClientOptions{APIKey: "k"})
	_, err := c.ListTools(context.Background())
	if err == nil || len(srv.received(http.MethodGet, "/v1/tools")) != 1 {
		t.Fatalf("err = %v; want the same-origin redirect followed and the other refused", err)
	}
	if n := len(other.received(http.MethodGet, "/tools")); n != 0 {
		t.Errorf("the other origin received %d requests", n)
	}
}

func TestClientHealth(t *testing.T) {
	srv := newFakeServer(t, answerWith(200, `{"status":"ok"}`))
	if err := newTestClient(t, srv.URL, nil).Health(context.Background()); err != nil {
		t.Errorf("healthy: %v", err)
	}
	srv = newFakeServer(t, answerWith(503, `{"message":"starting"}`))
	err := newTestClient(t, srv.URL, nil).Health(context.Background())
	var se *StatusError
	if !errors.As(err, &se) || se.StatusCode != 503 || se.Message != "starting" || !errors.Is(err, ErrServerFailure) {
		t.Errorf("unhealthy: %v", err)
	}
}

func TestClientResponseLimit(t *testing.T) {
	const limit = 64
	for _, size := range []int{limit, limit + 1} {
		body := `{"tools":[]}`
		body += strings.Repeat(" ", size-len(body))
		srv := newFakeServer(t, answerWith(200, body))
		_, err := newTestClient(t, srv.URL, &ClientOptions{MaxResponseBytes: limit}).ListTools(context.Background())
		if tooBig := errors.Is(err, ErrResponseTooLarge); tooBig != (size > limit) {
			t.Errorf("body of %d bytes with limit %d: err = %v", size, limit, err)
		}
	}
	srv := newFakeServer(t, answerWith(200, `{"success":true,"value":"`+strings.Repeat("v", 2*DefaultMaxResponseBytes)+`"}`))
	_, err := newTestClient(t, srv.URL, &ClientOptions{Dialect: DialectOXPFlat}).Call(context.Background(), bigCall())
	if !errors.Is(err, ErrResponseTooLarge) {
		t.Errorf("call with a 32 MiB answer: err = %v, want ErrResponseTooLarge", err)
	}
}

func TestClientMalformedAnswer(t *testing.T) {
	srv := newFakeServer(t, answerWith(200, `<html>hello</html>`))
	_, err := newTestClient(t, srv.URL, &ClientOptions{Dialect: DialectOTC10}).Call(context.Background(), bigCall())
	var se *StatusError
	if !errors.Is(err, ErrMalformedResponse) || errors.As(err, &se) {
		t.Errorf("err = %v, want ErrMalformedResponse and no StatusError", err)
	}
}

func TestClientTransportError(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	base := srv.URL
	srv.Close()
	c := newTestClient(t, base, &ClientOptions{Dialect: DialectOXP10})
	_, err := c.Call(context.Background(), bigCall())
	var se *StatusError
	if err == nil || errors.As(err, &se) || errors.Is(err, ErrMalformedResponse) {
		t.Errorf("err = %v, want a transport error", err)
	}
}

// blockingServer answers nothing until the request's context is done.
func blockingServer(t *testing.T) *fakeServer {
	return newFakeServer(t, func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
}

// checkCallEnds calls c with ctx and asserts that the call fails with want
// (ctx's error) soon after ctx ends.
func checkCallEnds(t *testing.T, c *Client, ctx context.Context, want error) {
	t.Helper()
	start := time.Now()
	_, err := c.Call(ctx, bigCall())
	if !errors.Is(err, want) {
		t.Errorf("err = %v, want %v", err, want)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("Call returned after %v", el)
	}
}

func TestClientContextCancellation(t *testing.T) {
	for _, d := range []Dialect{DialectOXP10, DialectAuto} {
		t.Run(string(d)+"/deadline", func(t *testing.T) {
			c := newTestClient(t, blockingServer(t).URL, &ClientOptions{Dialect: d})
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			defer cancel()
			checkCallEnds(t, c, ctx, context.DeadlineExceeded)
			if d == DialectAuto && c.Dialect() != DialectAuto {
				t.Errorf("a cancelled listing made the client settle on %q", c.Dialect())
			}
		})
		t.Run(string(d)+"/cancel", func(t *testing.T) {
			c := newTestClient(t, blockingServer(t).URL, &ClientOptions{Dialect: d})
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(50*time.Millisecond, cancel)
			checkCallEnds(t, c, ctx, context.Canceled)
		})
	}
}

func TestClientAutoLearnsOnce(t *testing.T) {
	release := make(chan struct{})
	srv := newFakeServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/tools" {
			<-release // hold the listing until every caller is waiting
			w.Header().Set(VersionHeader, "1.0")
			io.WriteString(w, `{"items":[]}`)
			return
		}
		io.WriteString(w, `{"call_id":"c","success":true,"value":1}`)
	})
	c := newTestClient(t, srv.URL, nil)
	const callers = 16
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for range callers {
		wg.Go(func() {
			_, err := c.Call(context.Background(), &CallToolRequest{ToolID: "A.B"})
			errs <- err
		})
	}
	time.Sleep(50 * time.Millisecond)
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if n := len(srv.received(http.MethodGet, "/tools")); n != 1 {
		t.Errorf("GET /tools %d times, want 1", n)
	}
	calls := srv.received(http.MethodPost, "/tools/call")
	if len(calls) != callers {
		t.Fatalf("%d calls received, want %d", len(calls), callers)
	}
	for _, e := range calls {
		assertJSONEqual(t, "flat call", e.Body, `{"tool_id":"A.B","input":{}}`)
		if e.Header.Get(VersionHeader) != "1.0" {
			t.Errorf("flat call without %s", VersionHeader)
		}
	}
}

func TestClientAutoFallsBack(t *testing.T) {
	srv := newFakeServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/tools" {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		io.WriteString(w, `{"$schema":"urn:oxp:1.0","result":{"call_id":"c","success":true}}`)
	})
	c := newTestClient(t, srv.URL, nil)
	for range 2 {
		if _, err := c.Call(context.Background(), &CallToolRequest{ToolID: "A.B", Input: json.RawMessage("null")}); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(srv.received(http.MethodGet, "/tools")); n != 1 {
		t.Errorf("GET /tools %d times, want 1", n)
	}
	if d := c.Dialect(); d != DialectOXP10 {
		t.Errorf("Dialect = %q after the fallback, want oxp-1.0", d)
	}
	for _, e := range srv.received(http.MethodPost, "/tools/call") {
		assertJSONEqual(t, "fallback call", e.Body, `{"$schema":"urn:oxp:1.0","request":{"tool_id":"A.B","input":{}}}`)
	}
}

func TestClientCallDoesNotMutateRequest(t *testing.T) {
	srv := newFakeServer(t, answerWith(200, `{"success":true}`))
	c := newTestClient(t, srv.URL, &ClientOptions{Dialect: DialectOTC10})
	req := &CallToolRequest{ToolID: "A.B", Context: &CallContext{UserID: "u", Secrets: []Secret{{ID: "K", Value: "v"}}}}
	before := *req
	beforeCtx := *req.Context
	if _, err := c.Call(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(*req, before) || !reflect.DeepEqual(*req.Context, beforeCtx) || req.Input != nil || req.CallID != "" {
		t.Errorf("Call changed the request: %+v", req)
	}
	assertJSONEqual(t, "sent", srv.received(http.MethodPost, "/tools/call")[0].Body,
		`{"$schema":"otc://1.0","request":{"tool_id":"A.B","input":{},"context":{"secrets":[{"id":"K","value":"v"}],"user_id":"u"}}}`)

	if _, err := c.Call(context.Background(), &CallToolRequest{}); err == nil {
		t.Error("a call without a tool id was sent")
	}
	if _, err := c.Call(context.Background(), nil); err == nil {
		t.Error("a nil call was sent")
	}
}

func TestNewClient(t *testing.T) {
	for _, base := range []string{"", "ftp://h/", "http://", "h:80", "http://user:hunter2@h/", "http://h/%zz", "/tools"} {
		_, err := NewClient(base, nil)
		if err == nil {
			t.Errorf("NewClient(%q) accepted it", base)
		} else if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("NewClient error leaks the password: %v", err)
		}
	}
	if _, err := NewClient("http://h", &ClientOptions{Dialect: "otc-2"}); err == nil {
		t.Error("an unknown dialect was accepted")
	}
	if c, err := NewClient("http://h", &ClientOptions{Dialect: "OXP-Flat"}); err != nil || c.Dialect() != DialectOXPFlat {
		t.Errorf("dialect name: %v", err)
	}

	for _, prefix := range []string{"/prefix", "/prefix/"} {
		srv := newFakeServer(t, func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, map[string]string{
				"/prefix/health":     `{}`,
				"/prefix/tools":      `{"items":[]}`,
				"/prefix/tools/call": `{"success":true}`,
			}[r.URL.Path])
		})
		c := newTestClient(t, srv.URL+prefix+"?tenant=t1#frag", nil)
		ctx := context.Background()
		if err := c.Health(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := c.ListTools(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Call(ctx, &CallToolRequest{ToolID: "A.B"}); err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{"/prefix/health", "/prefix/tools", "/prefix/tools/call"} {
			got := srv.received(map[bool]string{true: "POST", false: "GET"}[p == "/prefix/tools/call"], p)
			if len(got) != 1 || got[0].Query != "tenant=t1" {
				t.Errorf("base %s: %s received %+v", prefix, p, got)
			}
		}
	}
}

// A poller sees a listing it has seen as unchanged, without decoding it; a
// new byte, a new dialect header or a failure is not.
func TestClientListToolsChanged(t *testing.T) {
	var mu sync.Mutex
	tool := `{"id":"A.B@1.2.3","name":"A_B","description":"d","version":"1.2.3"}`
	body, status, header := `{"$schema":"urn:oxp:1.0","tools":[`+tool+`],"items":[`+tool+`]}`, http.StatusOK, ""
	srv := newFakeServer(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if header != "" {
			w.Header().Set(VersionHeader, header)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		io.WriteString(w, body)
	})
	set := func(b string, st int, h string) {
		mu.Lock()
		defer mu.Unlock()
		body, status, header = b, st, h
	}
	c := newTestClient(t, srv.URL, nil)
	ctx := context.Background()
	tools, d1, unchanged, err := c.ListToolsChanged(ctx, CatalogDigest{})
	if err != nil || unchanged || len(tools) != 1 || d1 == (CatalogDigest{}) {
		t.Fatalf("first listing: %d tools, unchanged %v, digest %x, %v; want 1 tool, a digest", len(tools), unchanged, d1, err)
	}
	tools, d2, unchanged, err := c.ListToolsChanged(ctx, d1)
	if err != nil || !unchanged || tools != nil || d2 != d1 {
		t.Fatalf("same listing: %d tools, unchanged %v, same digest %v, %v; want unchanged, no tools", len(tools), unchanged, d2 == d1, err)
	}
	set(body+" ", http.StatusOK, "")
	if _, d3, unchanged, err := c.ListToolsChanged(ctx, d1); err != nil || unchanged || d3 == d1 {
		t.Fatalf("one more byte: unchanged %v, same digest %v, %v; want changed", unchanged, d3 == d1, err)
	}
	set(body, http.StatusOK, "1.0")
	if _, d4, unchanged, err := c.ListToolsChanged(ctx, d1); err != nil || unchanged || d4 == d1 {
		t.Fatalf("same body with %s: unchanged %v, same digest %v, %v; want changed", VersionHeader, unchanged, d4 == d1, err)
	}
	set(body, http.StatusBadGateway, "")
	if tools, d5, unchanged, err := c.ListToolsChanged(ctx, d1); err == nil || unchanged || tools != nil || d5 != (CatalogDigest{}) {
		t.Fatalf("a failed listing: unchanged %v, digest %x, %v; want an error and a zero digest", unchanged, d5, err)
	}
}

// The default client keeps the connections of a burst of calls for the
// next one: a second burst as large as the first dials nothing new.
func TestClientKeepsBurstConnections(t *testing.T) {
	b := conntest.NewBurst(200) // more calls in flight than a pool of a few dozen keeps
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if b.Hold(r.Context()) != nil {
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"$schema":"urn:oxp:1.0","result":{"call_id":"c","success":true,"value":1}}`)
	}))
	srv.Config.ConnState = b.ConnState
	srv.Start()
	t.Cleanup(srv.Close)
	c := newTestClient(t, srv.URL, &ClientOptions{Dialect: DialectOXP10})
	b.KeepsConnections(t, func(ctx context.Context) error {
		_, err := c.Call(ctx, &CallToolRequest{ToolID: "A.B@1.0.0", CallID: NewCallID()})
		return err
	})
}
