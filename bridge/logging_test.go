package bridge

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/mcpotc/mcpotc/otc"
)

// logKeys decodes one JSON log line and returns its top-level keys in
// order, duplicates included (encoding/json would keep only the last).
func logKeys(t *testing.T, line []byte) ([]string, map[string]any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(line))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("log line is not a JSON object: %s", line)
	}
	var keys []string
	values := map[string]any{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatalf("log line %s: %v", line, err)
		}
		k := tok.(string)
		var v any
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("log line %s: %v", line, err)
		}
		keys = append(keys, k)
		values[k] = v
	}
	return keys, values
}

// checkLogLines parses every line of out and fails for a key that appears
// twice in one line; it returns the parsed lines.
func checkLogLines(t *testing.T, out []byte) []map[string]any {
	t.Helper()
	var lines []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		keys, values := logKeys(t, sc.Bytes())
		seen := map[string]bool{}
		for _, k := range keys {
			if seen[k] {
				t.Errorf("key %q twice in the log line %s", k, sc.Bytes())
			}
			seen[k] = true
		}
		lines = append(lines, values)
	}
	return lines
}

func TestSlogLoggerUniqueKeys(t *testing.T) {
	var buf bytes.Buffer
	log := slogLogger(zerolog.New(&buf).With().Timestamp().Logger())
	// As the mcp package logs an upstream's elicitation: an attribute named message.
	log.With("upstream", "u1").Info("upstream asked the user to open a URL; answered cancel",
		"url", "https://example.com/a", "message", "Please log in", "upstream", "again", "level", "x", "time", "y")
	log.WithGroup("g").Info("grouped", "message", "inside")
	lines := checkLogLines(t, buf.Bytes())
	if len(lines) != 2 {
		t.Fatalf("%d lines, want 2: %s", len(lines), buf.Bytes())
	}
	want := map[string]any{
		"level": "info", "message": "upstream asked the user to open a URL; answered cancel",
		"upstream": "u1", "attr_upstream": "again", "url": "https://example.com/a",
		"attr_message": "Please log in", "attr_level": "x", "attr_time": "y",
	}
	for k, v := range want {
		if lines[0][k] != v {
			t.Errorf("line 1: %s = %v, want %v (line %v)", k, lines[0][k], v, lines[0])
		}
	}
	if lines[1]["message"] != "grouped" || lines[1]["g.message"] != "inside" {
		t.Errorf("line 2: %v", lines[1])
	}
}

func TestLogOTCCallsCutsIDs(t *testing.T) {
	var buf bytes.Buffer
	long := strings.Repeat("é", 100) // 200 bytes; a cut at 64 falls on a rune boundary
	LogOTCCalls(zerolog.New(&buf))(&otc.CallRecord{CallID: long, TraceID: strings.Repeat("t", 256), ToolID: "A.b", Status: 200, Success: true})
	lines := checkLogLines(t, buf.Bytes())
	if len(lines) != 1 {
		t.Fatalf("%d lines", len(lines))
	}
	if got := lines[0]["call_id"]; got != strings.Repeat("é", 32) {
		t.Errorf("call_id logged as %q, want its first 64 bytes", got)
	}
	if got := lines[0]["trace_id"]; got != strings.Repeat("t", 64) {
		t.Errorf("trace_id logged as %q, want its first 64 bytes", got)
	}
	if got := cutID(strings.Repeat("a", 63) + "é"); got != strings.Repeat("a", 63) {
		t.Errorf("cutID split a rune: %q", got)
	}
}

func TestLogRefusals(t *testing.T) {
	const key = "the-api-key-0123456789"
	h, err := otc.NewHandler(nil, &otc.Options{APIKey: key})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	srv := httptest.NewServer(LogRefusals(zerolog.New(&buf), h))
	defer srv.Close()
	for i, sent := range []string{"", "wrong-key-" + key, key} {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/tools", nil)
		if sent != "" {
			req.Header.Set("OXP-API-Key", sent)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		want := http.StatusUnauthorized
		if i == 2 {
			want = http.StatusOK
		}
		if resp.StatusCode != want {
			t.Fatalf("request %d: HTTP %d, want %d", i, resp.StatusCode, want)
		}
	}
	lines := checkLogLines(t, buf.Bytes())
	if len(lines) != 2 {
		t.Fatalf("%d log lines for two refused requests, want 2: %s", len(lines), buf.Bytes())
	}
	for _, l := range lines {
		if l["status"] != float64(401) || l["path"] != "/tools" || l["method"] != "GET" || l["level"] != "warn" {
			t.Errorf("refusal line: %v", l)
		}
	}
	if bytes.Contains(buf.Bytes(), []byte(key)) {
		t.Errorf("the credential reached the log: %s", buf.Bytes())
	}
}
