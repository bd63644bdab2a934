package wiretest

import (
	"bytes"
	"encoding/json"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
)

func decoded(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := DecodeStrict([]byte(s), &v); err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	return v
}

func TestMatch(t *testing.T) {
	want := decoded(t, `{"id":"<uuid:call>","n":1.0,"at":"<rfc3339>","u":"<url>","any":"<any>","list":[1,"x"]}`)
	for _, tc := range []struct {
		m    Matcher
		got  string
		diff []string
	}{
		{Matcher{Root: "(body)"}, `{"id":"0b3d2f0e-8c1a-4c55-9a47-6f2b0c9d1e2f","n":1,"at":"2025-03-17T12:00:00Z","u":"https://a.example/x","any":{"deep":[1]},"list":[1,"x"]}`, nil},
		{Matcher{Root: "(frame)", ExactNumbers: true}, `{"id":"0b3d2f0e-8c1a-4c55-9a47-6f2b0c9d1e2f","n":1,"at":"2025-03-17T12:00:00Z","u":"https://a.example/x","any":null,"list":[1,"x"]}`,
			[]string{".n: 1, want 1.0"}},
		{Matcher{Root: "(body)"}, `{"id":"nope","n":1,"at":"yesterday","u":"ftp://a","any":1,"list":[1],"extra":true}`,
			[]string{`.at: "yesterday" does not match <rfc3339>`, `.id: "nope" does not match <uuid:call>`, `.list: 1 elements, want 2: [1]`, `.u: "ftp://a" does not match <url>`, `.extra: unexpected member true`}},
		{Matcher{Root: "(body)"}, `[1]`, []string{"(body): [1], want an object"}},
	} {
		captures := map[string]string{}
		got := tc.m.Match("", want, decoded(t, tc.got), captures)
		if !slices.Equal(got, tc.diff) {
			t.Errorf("%s:\n got %q\nwant %q", tc.got, got, tc.diff)
		}
		if tc.diff == nil && captures["call"] != "0b3d2f0e-8c1a-4c55-9a47-6f2b0c9d1e2f" {
			t.Errorf("captures %v", captures)
		}
	}
}

func TestSplitMessage(t *testing.T) {
	first, header, body, err := SplitMessage("POST /tools/call\nContent-Type: application/json\nOXP-Version:  1.0\n\n{\"a\":1}\n")
	if err != nil || first != "POST /tools/call" || !slices.Equal(header, []Header{{"Content-Type", "application/json"}, {"OXP-Version", "1.0"}}) || body != `{"a":1}` {
		t.Errorf("%q %v %q %v", first, header, body, err)
	}
	if _, _, _, err := SplitMessage("200\nnot a header\n\n{}"); err == nil || !strings.Contains(err.Error(), `bad header line "not a header"`) {
		t.Errorf("err = %v", err)
	}
	if err := DecodeStrict([]byte(`{} {}`), new(any)); err == nil {
		t.Error("two values decoded")
	}
}

func TestWriter(t *testing.T) {
	got := `{"id":"0b3d2f0e-8c1a-4c55-9a47-6f2b0c9d1e2f","session":"s-1","deep":{"a":[1,2]},"n":2}`
	want := decoded(t, `{"id":"<uuid>","deep":"<any>","n":1}`)
	for _, tc := range []struct {
		w   Writer
		out string
	}{
		{Writer{}, "{\n  \"id\": \"<uuid>\",\n  \"session\": \"s-1\",\n  \"deep\": {\n    \"a\": [\n      1,\n      2\n    ]\n  },\n  \"n\": 2\n}"},
		{Writer{Captures: map[string]string{"sid": "s-1"}, KeepAny: true, OneLine: 96}, "{\n  \"id\": \"<uuid>\",\n  \"session\": \"{{sid}}\",\n  \"deep\": \"<any>\",\n  \"n\": 2\n}"},
	} {
		var buf bytes.Buffer
		dec := json.NewDecoder(strings.NewReader(got))
		dec.UseNumber()
		if err := tc.w.WriteOrdered(&buf, dec, want, ""); err != nil || buf.String() != tc.out {
			t.Errorf("%+v:\n%s\nwant\n%s (%v)", tc.w, buf.String(), tc.out, err)
		}
	}
	if line, ok := oneLine([]byte("{\n  \"a\": [\n    1\n  ],\n  \"b\": \"x\"\n}")); !ok || line != `{"a": [1], "b": "x"}` {
		t.Errorf("oneLine = %q, %v", line, ok)
	}
}

func TestLike(t *testing.T) {
	var ext []string
	l := Like{Tolerate: func(_, k string) bool { return strings.HasPrefix(k, "x-") }, Ext: &ext}
	want := map[string]any{"id": "<uuid>", "n": 2, "f": 1.5, "s": "<string>", "re": "~^a+$", "?opt": true,
		"list": []string{"a"}, "any": "<any>", "m": map[string]any{"<open>": true, "k": "<number>"},
		"chk": func(v any) string {
			if v != "ok" {
				return "not ok"
			}
			return ""
		}}
	for _, got := range []map[string]any{
		{"id": "0b3d2f0e-8c1a-4c55-9a47-6f2b0c9d1e2f", "n": json.Number("2.0"), "f": 1.5, "s": "x", "re": "aaa", "list": []any{"a"}, "any": nil, "m": map[string]any{"k": 0.0, "other": 1}, "chk": "ok", "x-ext": 1},
		{"id": "0b3d2f0e-8c1a-4c55-9a47-6f2b0c9d1e2f", "n": 2.0, "f": json.Number("15e-1"), "s": "x", "re": "aaa", "?opt": nil, "opt": true, "list": []any{"a"}, "any": 1, "m": map[string]any{"k": json.Number("3")}, "chk": "ok"},
	} {
		if d := l.Diff("", want, got); len(d) != 0 {
			t.Errorf("%v: %q", got, d)
		}
	}
	if !slices.Equal(ext, []string{".x-ext = 1"}) {
		t.Errorf("ext = %q", ext)
	}
	bad := map[string]any{"id": "nope", "n": 3, "f": "1.5", "s": "", "re": "b", "list": []any{}, "m": map[string]any{"k": -1.0}, "chk": "no", "extra": 1}
	got := l.Diff("", want, bad)
	wantDiffs := []string{
		`.any: missing (want "<any>")`, `.chk: not ok`, `.f: want 1.5, got "1.5"`, `.id: want a UUID, got "nope"`,
		`.list: want an array of 1, got []`, `.m.k: want a number ≥ 0, got -1`, `.n: want 2, got 3`,
		`.re: want a string matching "^a+$", got "b"`, `.s: want a non-empty string, got ""`, `.extra: unexpected member 1`,
	}
	if !slices.Equal(got, wantDiffs) {
		t.Errorf("diffs:\n%q\nwant\n%q", got, wantDiffs)
	}
}

func TestKnownDeviation(t *testing.T) {
	for _, tc := range []struct {
		in  string
		err bool
	}{
		{`{"what":"w","match":"m"}`, false},
		{`{"what":"w","match":["a","b"]}`, false},
		{`{"what":"w","match":[]}`, true},
		{`{"what":"","match":"m"}`, true},
		{`{"what":"w","match":["a",""]}`, true},
	} {
		var kd KnownDeviation
		if err := json.Unmarshal([]byte(tc.in), &kd); err != nil {
			t.Fatal(err)
		}
		if err := kd.Check(); (err != nil) != tc.err {
			t.Errorf("%s: Check = %v", tc.in, err)
		}
	}
	kd := &KnownDeviation{What: "w", Match: Matches{"tolerated"}}
	if !kd.tolerates("a tolerated problem") || kd.tolerates("another") {
		t.Error("tolerates")
	}
}

func TestVectorName(t *testing.T) {
	for _, tc := range []struct{ file, scenario, dialect, err string }{
		{"call_ok.txtar", "call_ok", "", ""},
		{"call_ok.oxp-flat.txtar", "call_ok", "oxp-flat", ""},
		{"Call.txtar", "", "", "want scenario.txtar"},
		{"call.json", "", "", "ends in .txtar"},
		{"call.oxp-2.0.txtar", "", "", "want scenario.txtar"},
	} {
		s, d, err := VectorName(tc.file)
		if s != tc.scenario || d != tc.dialect || (err == nil) != (tc.err == "") || err != nil && !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: %q %q %v", tc.file, s, d, err)
		}
	}
}

func TestRecordCaptures(t *testing.T) {
	captured := map[string]int{}
	if err := RecordCaptures("1.response", decoded(t, `{"a": "<uuid:id>", "b": ["<number>"]}`), captured, 1); err != nil || captured["id"] != 1 || len(captured) != 1 {
		t.Fatalf("RecordCaptures = %v, captured %v", err, captured)
	}
	for _, tc := range []struct{ want, err string }{
		{`{"a": "<uid>"}`, "2.response: unknown placeholder <uid>"},
		{`{"a": "<string:id>"}`, `2.response: capture "id" is recorded twice`},
	} {
		if err := RecordCaptures("2.response", decoded(t, tc.want), captured, 2); err == nil || err.Error() != tc.err {
			t.Errorf("%s: error %v, want %q", tc.want, err, tc.err)
		}
	}
	if captured["id"] != 1 {
		t.Errorf("a refused capture overwrote the first: %v", captured)
	}
}

func TestDecodeOptions(t *testing.T) {
	var o struct {
		APIKey string `json:"api_key"`
	}
	if err := DecodeOptions(0, []byte(`{"api_key": "k"}`), &o); err != nil || o.APIKey != "k" {
		t.Errorf("DecodeOptions = %v, %+v", err, o)
	}
	for _, tc := range []struct {
		i    int
		data string
		err  string
	}{
		{1, `{}`, "options.json must be the first section"},
		{0, `{"apikey": "k"}`, "options.json: "},
	} {
		if err := DecodeOptions(tc.i, []byte(tc.data), &o); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%d %s: error %v, want one saying %q", tc.i, tc.data, err, tc.err)
		}
	}
}

func TestDecode(t *testing.T) {
	v, err := Decode([]byte(` {"n": 1.50, "a": [true, null, "s"]} `))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"n": json.Number("1.50"), "a": []any{true, nil, "s"}}
	if d := (Matcher{Root: "(value)", ExactNumbers: true}).Match("", want, v, nil); len(d) != 0 {
		t.Errorf("Decode = %#v: %q", v, d)
	}
	for _, bad := range []string{``, `{`, `{} {}`, `{}]`, `1 x`} {
		if v, err := Decode([]byte(bad)); err == nil || v != nil {
			t.Errorf("%q: Decode = %#v, %v; want nil and an error", bad, v, err)
		}
	}
}

func TestCompareHeaders(t *testing.T) {
	got := http.Header{"Content-Type": {"application/json"}, "Vary": {"a", "b"}, "X-Extra": {"1"}}
	want := []Header{{"Content-Type", "application/json"}, {"Vary", "a, b"}, {"X-Gone", ""}}
	if d := CompareHeaders(want, got); d != nil {
		t.Errorf("CompareHeaders = %q, want none", d)
	}
	want = []Header{{"Content-Type", "text/plain"}, {"X-Extra", ""}, {"X-Missing", "v"}}
	wantDiffs := []string{
		`header Content-Type: "application/json", want "text/plain"`,
		`header X-Extra: "1", want it absent`,
		`header X-Missing: "", want "v"`,
	}
	if d := CompareHeaders(want, got); !slices.Equal(d, wantDiffs) {
		t.Errorf("CompareHeaders:\n%q\nwant\n%q", d, wantDiffs)
	}
}

func TestOTCDialects(t *testing.T) {
	req := map[string]any{"tool_id": "T.t", "input": map[string]any{}}
	for _, tc := range []struct {
		schema, body string
		hdr          map[string]string
	}{
		{"otc://1.0", `{"$schema":"otc://1.0","request":{"input":{},"tool_id":"T.t"}}`, map[string]string{"Content-Type": "application/json"}},
		{"", `{"input":{},"tool_id":"T.t"}`, map[string]string{"Content-Type": "application/json", "OXP-Version": "1.0"}},
	} {
		body, hdr, err := OTCCall(tc.schema, req)
		if err != nil || string(body) != tc.body || !maps.Equal(hdr, tc.hdr) {
			t.Errorf("OTCCall(%q) = %s, %v, %v; want %s, %v", tc.schema, body, hdr, err, tc.body, tc.hdr)
		}
	}
	if _, _, err := OTCCall("", map[string]any{"input": func() {}}); err == nil {
		t.Error("OTCCall marshalled a func")
	}

	inner := map[string]any{"success": true}
	for _, tc := range []struct {
		schema string
		status int
		want   string
	}{
		{"", http.StatusOK, `{"success":true}`},
		{"", http.StatusNotFound, `{"success":true}`},
		{"urn:oxp:1.0", http.StatusOK, `{"$schema":"urn:oxp:1.0","result":{"success":true}}`},
		{"urn:oxp:1.0", http.StatusNotFound, `{"$schema":"urn:oxp:1.0","success":true}`},
	} {
		got, _ := json.Marshal(OTCAnswer(tc.schema, tc.status, inner))
		if string(got) != tc.want {
			t.Errorf("OTCAnswer(%q, %d) = %s, want %s", tc.schema, tc.status, got, tc.want)
		}
	}
	if len(inner) != 1 {
		t.Errorf("OTCAnswer modified inner: %v", inner)
	}
}
