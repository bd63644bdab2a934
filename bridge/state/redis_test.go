package state

import (
	"context"
	"strings"
	"testing"
	"time"
)

// Open reads the URL without connecting; its errors never quote a
// password. (The store's behaviour against a real redis-server is tested
// by the e2e suite, internal/e2e/scaleout_test.go.)
func TestOpenURL(t *testing.T) {
	for _, tc := range []struct{ url, want string }{
		{"http://h:6379", `scheme "http": want redis://, rediss:// (TLS) or unix://`},
		{"redis://:s3cret@h:6379/notanumber", "redis://:xxxxx@h:6379/notanumber: "},
		{"redis://u:s3cret@h:6379/0?dial_timeout=never", "redis://u:xxxxx@h:6379/0: "},
		{"::", "not a URL"},
	} {
		_, err := Open(tc.url, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Open(%q) = %v, want an error with %q", tc.url, err, tc.want)
			continue
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("Open(%q) = %v: quotes the password", tc.url, err)
		}
	}
	r, err := Open("rediss://:s3cret@h:6380/2", &Options{Password: "other"})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if got := r.String(); got != "rediss://:xxxxx@h:6380/2" {
		t.Errorf("String() = %q", got)
	}
	o := r.c.Options()
	if o.Password != "other" || o.TLSConfig == nil || o.DB != 2 {
		t.Errorf("options: password from Options %v, TLS %v, DB %d", o.Password == "other", o.TLSConfig != nil, o.DB)
	}
	if o.DialTimeout != DefaultDialTimeout || o.ReadTimeout != DefaultIOTimeout || o.PoolTimeout != DefaultPoolTimeout {
		t.Errorf("timeouts: dial %v read %v pool %v", o.DialTimeout, o.ReadTimeout, o.PoolTimeout)
	}
	r2, err := Open("redis://h:6379?dial_timeout=5s", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	if d := r2.c.Options().DialTimeout; d != 5*time.Second {
		t.Errorf("dial_timeout from the URL: %v", d)
	}
}

// A server that does not answer makes a request fail within the client's
// bounds, never hang.
func TestUnreachableFailsFast(t *testing.T) {
	r, err := Open("redis://127.0.0.1:1/0", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, _, err := r.Claim(ctx, "k", []byte("c"), time.Second, time.Minute); err == nil || ctx.Err() != nil {
		t.Fatalf("Claim on a closed port: %v (context: %v)", err, ctx.Err())
	}
	if err := r.Ping(ctx); err == nil || !strings.Contains(err.Error(), "redis redis://127.0.0.1:1/0") {
		t.Fatalf("Ping: %v", err)
	}
}
