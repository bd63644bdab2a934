package vault

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

type rec struct {
	Access string `json:"access"`
}

var ctx = context.Background()

func key(b byte) []byte { return bytes.Repeat([]byte{b}, KeySize) }

// stores runs f on a memory store and on a file store.
func stores(t *testing.T, o *Options, f func(t *testing.T, s Store)) {
	t.Run("memory", func(t *testing.T) { f(t, Memory(o)) })
	t.Run("file", func(t *testing.T) { f(t, openFile(t, filepath.Join(t.TempDir(), "tokens.json"), o)) })
}

// openFile opens the file store at path, failing t if it cannot.
func openFile(t *testing.T, path string, o *Options) *FileStore {
	t.Helper()
	s, err := OpenFile(path, o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestRoundTripAndExpiry(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	stores(t, &Options{Now: func() time.Time { return now }}, func(t *testing.T, s Store) {
		v, err := New(s, key(1))
		if err != nil {
			t.Fatal(err)
		}
		a, b := Key{Upstream: "up", User: "alice"}, Key{Upstream: "up", User: "bob"}
		var got rec
		if err := v.Get(ctx, a, &got); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Get of nothing: %v, want ErrNotFound", err)
		}
		if err := v.Put(ctx, a, rec{"token-a"}, now.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		if err := v.Put(ctx, b, rec{"token-b"}, time.Time{}); err != nil {
			t.Fatal(err)
		}
		if err := v.Get(ctx, a, &got); err != nil || got.Access != "token-a" {
			t.Errorf("alice: %v %+v", err, got)
		}
		if err := v.Get(ctx, b, &got); err != nil || got.Access != "token-b" {
			t.Errorf("bob: %v %+v", err, got)
		}
		if err := v.Get(ctx, Key{Upstream: "other", User: "alice"}, &got); !errors.Is(err, ErrNotFound) {
			t.Errorf("another upstream, same user: %v", err)
		}
		now = now.Add(time.Hour)
		if err := v.Get(ctx, a, &got); !errors.Is(err, ErrNotFound) {
			t.Errorf("expired: %v, want ErrNotFound", err)
		}
		if err := v.Get(ctx, b, &got); err != nil {
			t.Errorf("no expiry: %v", err)
		}
		for range 2 {
			if err := v.Delete(ctx, b); err != nil {
				t.Errorf("Delete: %v", err)
			}
		}
		if err := v.Get(ctx, b, &got); !errors.Is(err, ErrNotFound) {
			t.Errorf("deleted: %v", err)
		}
	})
}

// A record moved to another user's slot, or read with another key, does
// not open: ErrCorrupt, never the other user's token.
func TestRecordsAreBound(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens.json")
	s := openFile(t, path, nil)
	v, _ := New(s, key(1))
	alice, bob := Key{Upstream: "up", User: "alice"}, Key{Upstream: "up", User: "bob"}
	_ = v.Put(ctx, alice, rec{"token-a"}, time.Time{})
	_ = v.Put(ctx, bob, rec{"token-b"}, time.Time{})

	var m map[string]entry
	data, _ := os.ReadFile(path)
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	ida, idb := v.id(alice), v.id(bob)
	m[ida], m[idb] = m[idb], m[ida]
	swapped, _ := json.Marshal(m)
	if err := os.WriteFile(path, swapped, 0o600); err != nil {
		t.Fatal(err)
	}
	s2 := openFile(t, path, nil)
	v2, _ := New(s2, key(1))
	var got rec
	if err := v2.Get(ctx, alice, &got); !errors.Is(err, ErrCorrupt) || got.Access != "" {
		t.Errorf("alice's slot holding bob's record: %v %+v, want ErrCorrupt", err, got)
	}
	v3, _ := New(s2, key(2))
	if err := v3.Get(ctx, Key{Upstream: "up", User: "alice"}, &got); !errors.Is(err, ErrNotFound) {
		t.Errorf("another key finds another id: %v", err)
	}
	// The same id under another key: ErrCorrupt.
	v4, _ := New(s2, key(2))
	sealed, _ := s2.Get(ctx, v.id(bob))
	_ = s2.Put(ctx, v4.id(bob), sealed, time.Time{})
	if err := v4.Get(ctx, bob, &got); !errors.Is(err, ErrCorrupt) {
		t.Errorf("another key: %v, want ErrCorrupt", err)
	}
	// A record of another kind moved to a token's slot: ErrCorrupt.
	other := Key{Kind: "authorization", Upstream: "up", User: "alice"}
	_ = v2.Put(ctx, other, rec{"not-a-token"}, time.Time{})
	sealed, _ = s2.Get(ctx, v2.id(other))
	_ = s2.Put(ctx, v2.id(alice), sealed, time.Time{})
	if err := v2.Get(ctx, alice, &got); !errors.Is(err, ErrCorrupt) {
		t.Errorf("a record of another kind in a token's slot: %v, want ErrCorrupt", err)
	}
}

// The file survives a reopen (a restart), is the owner's only, and holds
// neither the user, the upstream nor the token in clear.
func TestFileStore(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tokens.json")
	s := openFile(t, path, nil)
	v, _ := New(s, key(3))
	k := Key{Upstream: "github-upstream", User: "user-4711@example.com"}
	if err := v.Put(ctx, k, rec{"gho_SECRETTOKEN"}, time.Time{}); err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(path)
	if st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", st.Mode().Perm())
	}
	data, _ := os.ReadFile(path)
	for _, clear := range []string{"gho_SECRETTOKEN", "user-4711", "github-upstream"} {
		if bytes.Contains(data, []byte(clear)) {
			t.Errorf("the file holds %q in clear", clear)
		}
	}
	s2 := openFile(t, path, nil)
	v2, _ := New(s2, key(3))
	var got rec
	if err := v2.Get(ctx, k, &got); err != nil || got.Access != "gho_SECRETTOKEN" {
		t.Errorf("after reopening: %v %+v", err, got)
	}
	if _, err := New(s2, nil); err == nil {
		t.Error("a file store without a key was accepted")
	}
	if _, err := New(Memory(nil), nil); err != nil {
		t.Errorf("a memory store with a random key: %v", err)
	}

	bad := filepath.Join(dir, "bad.json")
	_ = os.WriteFile(bad, []byte(`{"x": `), 0o600)
	if _, err := OpenFile(bad, nil); err == nil || !strings.Contains(err.Error(), bad) {
		t.Errorf("a corrupt file: %v, want an error naming it", err)
	}
	if b, _ := os.ReadFile(bad); string(b) != `{"x": ` {
		t.Error("a corrupt file was changed")
	}
	if _, err := OpenFile(filepath.Join(dir, "nope", "tokens.json"), nil); err == nil || !strings.Contains(err.Error(), "directory does not exist") {
		t.Errorf("a missing directory: %v", err)
	}
	if entries, _ := filepath.Glob(filepath.Join(dir, ".tokens-*")); len(entries) > 0 {
		t.Errorf("temporary files left: %v", entries)
	}
}

func TestBounded(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	stores(t, &Options{MaxEntries: 3, Now: func() time.Time { return now }}, func(t *testing.T, s Store) {
		v, _ := New(s, key(1))
		_ = v.Put(ctx, Key{Upstream: "u", User: "1"}, rec{"a"}, now.Add(time.Minute))
		_ = v.Put(ctx, Key{Upstream: "u", User: "2"}, rec{"b"}, time.Time{})
		_ = v.Put(ctx, Key{Upstream: "u", User: "3"}, rec{"c"}, time.Time{})
		if err := v.Put(ctx, Key{Upstream: "u", User: "4"}, rec{"d"}, time.Time{}); !errors.Is(err, ErrFull) {
			t.Fatalf("past the bound: %v, want ErrFull", err)
		}
		if err := v.Put(ctx, Key{Upstream: "u", User: "2"}, rec{"b2"}, time.Time{}); err != nil {
			t.Errorf("replacing a record in a full store: %v", err)
		}
		now = now.Add(time.Minute)
		if err := v.Put(ctx, Key{Upstream: "u", User: "4"}, rec{"d"}, time.Time{}); err != nil {
			t.Errorf("after an expiry: %v", err)
		}
	})
}

// 64 goroutines put, get and delete shared and own keys; afterwards the
// file holds what memory does.
func TestConcurrent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens.json")
	s := openFile(t, path, nil)
	v, _ := New(s, key(5))
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Go(func() {
			own := Key{Upstream: "up", User: fmt.Sprint("user-", i)}
			shared := Key{Upstream: "up", User: ""}
			for j := range 5 {
				_ = v.Put(ctx, own, rec{fmt.Sprint(i, "-", j)}, time.Time{})
				_ = v.Put(ctx, shared, rec{fmt.Sprint(i)}, time.Time{})
				var got rec
				if err := v.Get(ctx, own, &got); err != nil || got.Access != fmt.Sprint(i, "-", j) {
					t.Errorf("user %d: %v %+v", i, err, got)
				}
				if i%2 == 0 {
					_ = v.Delete(ctx, own)
				}
			}
		})
	}
	wg.Wait()
	s2 := openFile(t, path, nil)
	if len(s2.r.m) != len(s.r.m) || len(s.r.m) != 33 {
		t.Errorf("file %d records, memory %d, want 33", len(s2.r.m), len(s.r.m))
	}
	for id, e := range s.r.m {
		if !bytes.Equal(s2.r.m[id].V, e.V) {
			t.Errorf("record %s differs on disk", id[:8])
		}
	}
}

func TestParseKey(t *testing.T) {
	k := key(9)
	for _, s := range []string{
		base64.StdEncoding.EncodeToString(k), base64.RawStdEncoding.EncodeToString(k),
		base64.URLEncoding.EncodeToString(k), hex.EncodeToString(k), " " + hex.EncodeToString(k) + "\n",
	} {
		got, err := ParseKey(s)
		if err != nil || !bytes.Equal(got, k) {
			t.Errorf("ParseKey(%q) = %x, %v", s, got, err)
		}
	}
	for _, s := range []string{"", "short", base64.StdEncoding.EncodeToString(k[:16]), "not-base64-SECRETVALUE!!"} {
		_, err := ParseKey(s)
		if err == nil {
			t.Errorf("ParseKey(%q) accepted", s)
		} else if s != "" && strings.Contains(err.Error(), s) {
			t.Errorf("the error quotes the input: %v", err)
		}
	}
}

// A store opened with another key is told apart from an empty one: the
// key-check record does not open (issue: a wrong --token-key-env read as
// "no tokens", silently, and everyone had to authorize again). A new store
// gets the record; the right key, after a restart, passes.
func TestCheckKey(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens.json")
	v, err := New(openFile(t, path, nil), key(1))
	if err != nil {
		t.Fatal(err)
	}
	if err := v.CheckKey(t.Context()); err != nil {
		t.Fatalf("a new store: %v", err)
	}
	if err := v.Put(t.Context(), Key{Upstream: "u", User: "alice"}, "token", time.Time{}); err != nil {
		t.Fatal(err)
	}
	again, _ := New(openFile(t, path, nil), key(1))
	if err := again.CheckKey(t.Context()); err != nil {
		t.Errorf("the same key after a restart: %v", err)
	}
	wrong, _ := New(openFile(t, path, nil), key(2))
	if err := wrong.CheckKey(t.Context()); !errors.Is(err, ErrWrongKey) {
		t.Errorf("another key: %v, want ErrWrongKey", err)
	}
	// The wrong key wrote nothing: the right one still reads the token.
	var tok string
	if err := again.Get(t.Context(), Key{Upstream: "u", User: "alice"}, &tok); err != nil || tok != "token" {
		t.Errorf("after a refused key: %q %v", tok, err)
	}
}

// Sum and Seal are keyed by the vault key and the label: another key or
// another label neither matches nor opens.
func TestSumAndSeal(t *testing.T) {
	a, _ := New(Memory(nil), key(1))
	b, _ := New(Memory(nil), key(1))
	c, _ := New(Memory(nil), key(2))
	if !bytes.Equal(a.Sum("x", []byte("s")), b.Sum("x", []byte("s"))) {
		t.Error("two vaults with one key disagree on a sum")
	}
	if bytes.Equal(a.Sum("x", []byte("s")), c.Sum("x", []byte("s"))) || bytes.Equal(a.Sum("x", []byte("s")), a.Sum("y", []byte("s"))) ||
		bytes.Equal(a.Sum("x", []byte("ab"), []byte("c")), a.Sum("x", []byte("a"), []byte("bc"))) {
		t.Error("sums under another key, label or split are equal")
	}
	sealed := a.Seal("login", []byte("secret"))
	if bytes.Contains(sealed, []byte("secret")) {
		t.Error("the plain text is in the sealed value")
	}
	if p, err := b.Open("login", sealed); err != nil || string(p) != "secret" {
		t.Errorf("open with the same key: %q %v", p, err)
	}
	if _, err := c.Open("login", sealed); err == nil {
		t.Error("opened with another key")
	}
	if _, err := a.Open("other", sealed); err == nil {
		t.Error("opened under another label")
	}
}
