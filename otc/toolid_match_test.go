package otc

import (
	"math/rand/v2"
	"regexp"
	"testing"
)

// The hand-written matchers must accept exactly what the spec's patterns do.
var (
	specToolID   = regexp.MustCompile(`^[A-Za-z0-9_]+\.[A-Za-z0-9_]+(@([0-9]+|[0-9]+\.[0-9]+\.[0-9]+))?$`)
	specVersion  = regexp.MustCompile(`^[0-9]+\.[0-9]+\.[0-9]+$`)
	specToolName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
)

func checkMatchers(t *testing.T, s string) {
	t.Helper()
	if got, want := matchToolID(s), specToolID.MatchString(s); got != want {
		t.Errorf("matchToolID(%q) = %v, the pattern says %v", s, got, want)
	}
	if got, want := ValidVersion(s), specVersion.MatchString(s); got != want {
		t.Errorf("ValidVersion(%q) = %v, the pattern says %v", s, got, want)
	}
	if got, want := ValidToolName(s), specToolName.MatchString(s); got != want {
		t.Errorf("ValidToolName(%q) = %v, the pattern says %v", s, got, want)
	}
}

func TestMatchersAgreeWithPatterns(t *testing.T) {
	fixed := []string{"", ".", "@", "a.b", "a.b@", "a.b@1", "a.b@1.", "a.b@1.2", "a.b@1.2.3", "a.b@1.2.3.", "a.b@01.002.3",
		"a.b@1.2.3\n", "a.b\n", "a..b", "a.b.c", "_._", "a.b@x", "a.b@1.2.x", "1.2.3", "1.2.3\n", "1..3", ".1.2", "1.2.3.4",
		"Ä.b", "a.bÄ", "a-b", "a-b.c", string(make([]byte, 64)), "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-ab",
		"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-a"}
	for _, s := range fixed {
		checkMatchers(t, s)
	}
	alphabet := []byte("aZ09_.@-.@1\n Ä")
	r := rand.New(rand.NewPCG(1, 2))
	for range 200000 {
		b := make([]byte, r.IntN(12))
		for i := range b {
			b[i] = alphabet[r.IntN(len(alphabet))]
		}
		checkMatchers(t, string(b))
	}
}

func FuzzMatchers(f *testing.F) {
	for _, s := range []string{"Calculator.Add@1.0.0", "a.b@1", "1.2.3", "Tool-Name"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) { checkMatchers(t, s) })
}

// The versions SetTools resolves ahead of calls must be what
// ResolveVersion answers.
func TestCatalogResolveMatchesResolveVersion(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	parts := []string{"0", "1", "2", "01", "10", "18446744073709551616"}
	requests := []string{"", "0", "1", "2", "01", "10", "1.0.0", "01.0.0", "1.1.0", "2.0.1", "18446744073709551616", "1.0", "x", "1.0.0.0"}
	for range 2000 {
		tv := &toolVersions{byVer: map[string]*servedTool{}}
		for range 1 + r.IntN(5) {
			v := parts[r.IntN(len(parts))] + "." + parts[r.IntN(len(parts))] + "." + parts[r.IntN(len(parts))]
			if _, dup := tv.byVer[v]; !dup {
				tv.byVer[v] = &servedTool{}
				tv.versions = append(tv.versions, v)
			}
		}
		c := &catalog{byKey: map[string]*toolVersions{"A.B": tv}}
		c.resolveVersions()
		for _, req := range requests {
			got, gotOK := tv.resolve(req)
			want, wantOK := ResolveVersion(req, tv.versions)
			if got != want || gotOK != wantOK {
				t.Fatalf("versions %v, request %q: resolve = %q %v, ResolveVersion = %q %v", tv.versions, req, got, gotOK, want, wantOK)
			}
		}
	}
}
