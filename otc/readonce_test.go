package otc

import (
	"bytes"
	"encoding/json"
	"runtime/debug"
	"testing"
)

// A POST /tools/call body is read once: json.Valid, then a walk of its
// top level and of the envelope's request. The input is neither decoded
// nor copied (it is a slice of the body), and a tool whose schema is
// {"type":"object"} has it checked without a decode.
func TestOTCFrontReadsToolsCallOnce(t *testing.T) {
	body := []byte(`{"$schema":"urn:oxp:1.0","request":{"tool_id":"Bench.Plain@1.0.0","call_id":"c-1","input":{"text":"hello","n":[1,2.5,-3e2]}}}`)
	v, err := compileInputSchema("Bench.Plain@1.0.0", json.RawMessage(`{"type":"object","description":"any object"}`))
	if err != nil || !v.anyObject {
		t.Fatalf("compile: %v, anyObject %v", err, v != nil && v.anyObject)
	}
	allocs := 1e9
	for range 5 { // the fewest of five: another test's goroutine can add some
		allocs = min(allocs, testing.AllocsPerRun(100, func() {
			req, _, failure := parseCall(&reply{}, body)
			if failure != nil {
				t.Fatal(failure)
			}
			if perrs := v.validateRead(req.Input, true); perrs != nil {
				t.Fatal(perrs)
			}
		}))
	}
	// The request, its tool_id and call_id: three allocations, none of
	// the input.
	if allocs > 3 && !raceBuild() {
		t.Errorf("reading a call allocates %v times, want at most 3", allocs)
	}
	req, _, _ := parseCall(&reply{}, body)
	at := bytes.Index(body, []byte(`{"text"`))
	body[at+2] = 'T' // the body's own bytes: the input changes with them
	if string(req.Input) != `{"Text":"hello","n":[1,2.5,-3e2]}` {
		t.Errorf("the input is not the bytes of the body: %s", req.Input)
	}
}

// The last of a repeated key counts, as it did when encoding/json read the
// body into a map.
func TestOTCFrontLastKeyWins(t *testing.T) {
	rp := &reply{}
	req, _, failure := parseCall(rp, []byte(`{"$schema":"urn:oxp:1.0","request":{"tool_id":"A.B@1.0.0"},"request":{"tool_id":"C.D@1.0.0","input":{"a":1},"input":{"a":2}}}`))
	if failure != nil || req.ToolID != "C.D@1.0.0" || string(req.Input) != `{"a":2}` {
		t.Errorf("parseCall = %+v %v, want the last request and input", req, failure)
	}
}

// A schema that accepts every object is checked without a decode, and
// answers as the validator does.
func TestValidateAnyObject(t *testing.T) {
	for schema, want := range map[string]bool{
		`{"type":"object"}`: true, `{}`: true, `{"type":"object","properties":{},"required":[],"title":"t"}`: true,
		`{"type":"object","properties":{"a":{}}}`: false, `{"type":"object","additionalProperties":false}`: false,
		`{"type":"object","maxProperties":1}`: false, `{"type":"array"}`: false,
	} {
		v, err := compileInputSchema("T.T@1.0.0", json.RawMessage(schema))
		if err != nil {
			t.Fatal(err)
		}
		if v.anyObject != want {
			t.Errorf("%s: anyObject = %v, want %v", schema, v.anyObject, want)
		}
	}
	plain, _ := compileInputSchema("T.T@1.0.0", json.RawMessage(`{"type":"object"}`))
	decoded := *plain
	decoded.anyObject = false
	for _, in := range []string{``, `{}`, `{"a":{"b":[1,"1e99999",true,null]}}`, `[1]`, `"x"`, `{"a":1e99999}`, `{"a":{"b":[1e-99999]}}`, `{"a":` + string(bytes.Repeat([]byte("9"), 5000)) + `}`, `{"a"`} {
		got, want := plain.validate(json.RawMessage(in)), decoded.validate(json.RawMessage(in))
		if len(got) != len(want) {
			t.Errorf("validate(%.40s) = %v, want %v", in, got, want)
		}
		for k := range want {
			if got[k] != want[k] {
				t.Errorf("validate(%.40s) = %v, want %v", in, got, want)
			}
		}
	}
	in := json.RawMessage(`{"a":[1,2,{"b":"c"}]}`)
	if n := testing.AllocsPerRun(100, func() { plain.validateRead(in, true) }); n > 0 && !raceBuild() {
		t.Errorf("validating against {\"type\":\"object\"} allocates %v times, want 0", n)
	}
}

// The fingerprint reads the input as json.Compact writes it, without
// writing it: fingerprints stay those of earlier versions (a shared store
// holds them).
func TestFingerprintOfCompactInput(t *testing.T) {
	for _, in := range []string{`{}`, `{ "a" : [ 1 , 2 ] ,"b":"x y\" z" }`, "\t{\n\"a\\\\\" :\r\n\"\\\" \"}\n", `{"a":"é  ü"}`} {
		var c bytes.Buffer
		if err := json.Compact(&c, []byte(in)); err != nil {
			t.Fatal(err)
		}
		var got []byte
		eachCompact([]byte(in), func(s []byte) { got = append(got, s...) })
		if string(got) != c.String() || compactLen([]byte(in)) != c.Len() {
			t.Errorf("eachCompact(%q) = %q, want %q", in, got, c.String())
		}
		if fingerprint("T.T@1.0.0", json.RawMessage(in), nil) != fingerprint("T.T@1.0.0", c.Bytes(), nil) {
			t.Errorf("fingerprint(%q) differs from that of its compact form", in)
		}
	}
}

func FuzzEachCompact(f *testing.F) {
	f.Add([]byte(`{ "a" : [ 1 , "x \" y" ] }`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var c bytes.Buffer
		if json.Compact(&c, b) != nil {
			return
		}
		var got []byte
		eachCompact(b, func(s []byte) { got = append(got, s...) })
		if !bytes.Equal(got, c.Bytes()) {
			t.Fatalf("eachCompact(%q) = %q, want %q", b, got, c.Bytes())
		}
	})
}

// raceBuild reports whether the test binary was built with -race.
func raceBuild() bool {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range bi.Settings {
		if s.Key == "-race" {
			return s.Value == "true"
		}
	}
	return false
}
