package front

import (
	"encoding/json"
	"reflect"
	"testing"
)

// FuzzSkimAgreesWithDecode: the skim (skim.go) never changes what the
// front answers. checkMessage, the session check of preparePost and
// fillNotificationVersion decide as their encoding/json paths alone do,
// malformed input included; and on a well-formed object the skim finds
// the members encoding/json finds.
func FuzzSkimAgreesWithDecode(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{"a":"b \" c","n":[1,{"d":null}]}}}`,
		`{"jsonrpc":"2.0","id":null,"method":"x"}`, `{"id":{},"method":"x"}`, `{"id":[1],"method":"x"}`, `{"id":true,"method":"x"}`,
		`{"ID":"a","Method":"m","id":null}`, `{"\u0069d":false,"method":"m"}`, `{"id":1,"method":5}`, `{"method":"initialize","id":1}`,
		`{"method":"notifications/cancelled","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`,
		`{"method":"tools/list","id":2,"params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2025-11-25"}}}`,
		`{"method":"tools/list","id":2,"params":[]}`, `{"method":"tools/list","id":2,"params":{"_meta":[]}}`,
		`{"method":"tools/list","id":2,"params":{"_META":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`,
		`{"method":"n","params":null}`, `{"method":"n","params":{"_meta":null}}`, `{"method":"n"`, `{"id":1,"method":"x"} x`,
		` {"id" : "a\\"b" , "method" : "m\u00e9" } `, `{"a":tru}`, `{"id":1,"method":"x","p":[}`, `[]`, `"x"`, `{}`, ``,
		`{"method":"initialize","id":1,"params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > 0 && b[0] == '{' {
			if got, want := checkMessage(b), checkObject(b); got != want {
				t.Fatalf("checkMessage(%q) = %q, encoding/json decides %q", b, got, want)
			}
		}
		for _, noSession := range []bool{false, true} {
			method, needs := skimSessionless(b)
			if needs && noSession || method == "initialize" {
				method, needs = sessionless(b)
			}
			wantMethod, wantNeeds := sessionless(b)
			if needs && noSession != (wantNeeds && noSession) || (method == "initialize") != (wantMethod == "initialize") {
				t.Fatalf("session check of %q (no session id: %v): skim decides method %q, needs a session %v; encoding/json: %q, %v",
					b, noSession, method, needs, wantMethod, wantNeeds)
			}
			if json.Valid(b) {
				if m, n := skimSessionless(b); m != wantMethod || n != wantNeeds {
					t.Fatalf("skimSessionless(%q) = %q, %v; sessionless = %q, %v", b, m, n, wantMethod, wantNeeds)
				}
			}
		}
		if got, want := fillNotificationVersion(b, "2026-07-28"), fillNotification(b, "2026-07-28"); string(got) != string(want) {
			t.Fatalf("fillNotificationVersion(%q) = %q, without the skim %q", b, got, want)
		}
		if json.Valid(b) {
			want, wok := topMembers(b)
			got, gok := skimMembers(b)
			if gok != wok || !reflect.DeepEqual(got, want) {
				t.Fatalf("skimMembers(%q) = %v, %v; topMembers = %v, %v", b, got, gok, want, wok)
			}
		}
	})
}

// The skim against the encoding/json paths it replaces, on a small call.
func BenchmarkCheckMessage(b *testing.B) {
	msg := []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"Calculator_Add","arguments":{"a":2,"b":3},"_meta":{"progressToken":1}}}`)
	for _, bc := range []struct {
		name  string
		check func([]byte) invalid
		sess  func([]byte) (string, bool)
	}{{"skim", checkMessage, skimSessionless}, {"encoding-json", checkObject, sessionless}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if bc.check(msg) != "" {
					b.Fatal("refused")
				}
				if m, _ := bc.sess(msg); m != "tools/call" {
					b.Fatal(m)
				}
			}
		})
	}
}
