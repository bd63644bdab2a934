package bridge

import (
	"context"
	"net/http"
	"slices"
	"sync/atomic"
	"testing"
	"time"
)

// counting counts the requests a handler serves.
type counting struct {
	h http.Handler
	n atomic.Int64
}

func (c *counting) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.n.Add(1)
	c.h.ServeHTTP(w, r)
}

// An upstream whose first listing fails (503: an OTC server still
// starting) or is empty is listed again within firstListMax, not at the
// next Refresh (30 s here), with waits that grow (no tight loop); once
// every upstream lists tools, only Refresh lists again.
func TestMCPFrontFirstListingRetriedSoon(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
	}{{"503", http.StatusServiceUnavailable}, {"empty", http.StatusOK}} {
		t.Run(tc.name, func(t *testing.T) {
			late := &switchable{}
			late.set(tc.status, `[]`)
			c := &counting{h: late}
			f, err := NewMCPFront(context.Background(), []OTCServer{otcUpstreamOn(t, "late", "", c)}, &MCPFrontOptions{Refresh: 30 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go f.Run(ctx)
			time.Sleep(2500 * time.Millisecond)
			if n := c.n.Load(); n < 4 || n > 9 {
				t.Errorf("%d listings in the first 2.5 s, want a growing backoff (100 ms doubling to 1 s: about 6)", n)
			}
			late.set(http.StatusOK, `[`+toolDef("L.Tool@1.0.0", "L_Tool")+`]`)
			ready := time.Now()
			for !slices.Contains(toolNames(f), "L_Tool") {
				if time.Since(ready) > 3*time.Second {
					t.Fatalf("the tool was not served within 3 s of its server being ready")
				}
				time.Sleep(10 * time.Millisecond)
			}
			if d := time.Since(ready); d > firstListMax+300*time.Millisecond {
				t.Errorf("served %v after its server was ready, want within about %v", d, firstListMax)
			}
			n := c.n.Load()
			time.Sleep(1500 * time.Millisecond)
			if m := c.n.Load(); m != n {
				t.Errorf("%d listings after every upstream listed tools, want none before Refresh", m-n)
			}
		})
	}
}
