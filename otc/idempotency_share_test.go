package otc

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// One caller cannot flush the call_id answers kept for the others (issue
// 34, item 5). With IdempotencyMaxBytes 1 MiB (a caller's share 128 KiB;
// the defaults, 64 MiB and 8 MiB, scale it by 64), victim's call is kept;
// mallory then stores 11 answers of 100 kB (each just under the largest
// kept, a tenth of the bytes; together more than all the bytes). victim's retry is answered from the store, byte for
// byte, and the tool does not run again; mallory's newest answer is kept
// and her oldest were the ones evicted (their retry runs the tool again).
// (Before: the store evicted the oldest answer of all callers, victim's,
// whose retry ran the tool a second time.)
func TestIdempotencyShareKeepsOthersAnswers(t *testing.T) {
	secret := []byte("share-test-secret")
	const maxBytes, big = 1 << 20, 100_000
	var mu sync.Mutex
	runs := map[string]int{}
	h := newTestHandler(t, &Options{JWTSecret: secret, IdempotencyTTL: time.Hour, IdempotencyMaxBytes: maxBytes},
		testTool("T.Big@1.0.0", func(_ context.Context, c *Call) (json.RawMessage, error) {
			var in struct{ X int }
			_ = json.Unmarshal(c.Request.Input, &in)
			mu.Lock()
			who := "victim" // by the size asked: the caller's naming is not this test's concern
			if in.X == big {
				who = "mallory"
			}
			runs[who]++
			n := runs[who]
			mu.Unlock()
			return json.Marshal(fmt.Sprintf("run %d %s", n, strings.Repeat("x", in.X)))
		}))
	token := func(sub string) string {
		s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": sub, "exp": time.Now().Add(time.Hour).Unix()}).SignedString(secret)
		if err != nil {
			t.Fatal(err)
		}
		return "Bearer " + s
	}
	victim, mallory := token("victim"), token("mallory")
	call := func(auth, callID string, size int) (int, string) {
		header := map[string]string{"OXP-Version": "1.0", "Content-Type": "application/json", "Authorization": auth}
		status, _, body := do(t, h, http.MethodPost, "/tools/call", header, `{"tool_id":"T.Big","call_id":"`+callID+`","input":{"x":`+strconv.Itoa(size)+`}}`)
		v, _ := body["value"].(string)
		if status != http.StatusOK || body["success"] != true {
			t.Fatalf("call %s: %d %.200v", callID, status, body)
		}
		return status, v
	}
	ran := func(who string) int {
		mu.Lock()
		defer mu.Unlock()
		return runs[who]
	}
	_, first := call(victim, "victim-1", 10)
	for i := range 11 {
		call(mallory, "flood-"+strconv.Itoa(i), big)
	}
	if _, again := call(victim, "victim-1", 10); again != first {
		t.Errorf("victim's retry: %.40q, want the kept answer %q", again, first)
	}
	if n := ran("victim"); n != 1 {
		t.Errorf("victim's tool ran %d times, want once (the retry answered from the store)", n)
	}
	call(mallory, "flood-10", big)
	if n := ran("mallory"); n != 11 {
		t.Errorf("mallory's newest answer was not kept: her tool ran %d times, want 11", n)
	}
	call(mallory, "flood-0", big)
	if n := ran("mallory"); n != 12 {
		t.Errorf("mallory's oldest answer was kept: her tool ran %d times, want 12 (her oldest evicted)", n)
	}
	if kept, bytes := h.IdempotencyStats(); bytes > maxBytes/8+maxBytes/10 || kept > 3 {
		t.Errorf("%d answers, %d bytes kept", kept, bytes)
	}
}
