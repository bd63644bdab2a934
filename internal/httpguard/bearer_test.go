package httpguard

import "testing"

// Only the Bearer scheme carries a token; an empty one is none.
func TestBearer(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		header, token string
		ok            bool
	}{
		{"Bearer abc", "abc", true},
		{"bearer abc", "abc", true},
		{"BEARER  abc  ", "abc", true},
		{"Bearer a b", "a b", true},
		{"Bearer ", "", false},
		{"Bearer", "", false},
		{"Basic YWxhZGRpbjpvcGVuc2VzYW1l", "", false},
		{"Bearerabc", "", false},
		{"", "", false},
	} {
		token, ok := Bearer(tc.header)
		if token != tc.token || ok != tc.ok {
			t.Errorf("Bearer(%q) = %q, %t; want %q, %t", tc.header, token, ok, tc.token, tc.ok)
		}
	}
}

// A guess that shares a prefix with the secret, is a prefix of it, or
// extends it is not the secret; the secret is.
func TestEqualSecret(t *testing.T) {
	t.Parallel()
	const secret = "s3cret-token"
	for _, guess := range []string{"", "s", "s3cret-toke", "s3cret-tokenX", "S3CRET-TOKEN", "x3cret-token"} {
		if EqualSecret(guess, secret) {
			t.Errorf("EqualSecret(%q, secret) = true", guess)
		}
	}
	if !EqualSecret(secret, secret) || !EqualSecret("", "") {
		t.Error("EqualSecret of equal strings = false")
	}
}
