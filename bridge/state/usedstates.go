package state

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// UseOnce implements the MCP front's front.UsedStateStore: it marks key
// (a hash of a requestState) used until expires, "mcpotc:mrts:<key>" set
// only if it is not there (SET NX, expiring at expires in Redis's clock
// of absolute time), and reports whether this call set it. Replicas that
// share the state keys then refuse each other's used states too. Each
// mark expires with its state; what one caller can mark is bounded by
// the calls it can make (rate limits), not counted here.
func (r *Redis) UseOnce(ctx context.Context, _ string, key string, expires time.Time) (bool, error) {
	if !expires.After(time.Now()) {
		return false, nil // expired: refused before it comes here
	}
	_, err := r.c.SetArgs(ctx, keyPrefix+"mrts:"+key, "1", redis.SetArgs{Mode: "NX", ExpireAt: expires}).Result()
	switch {
	case errors.Is(err, redis.Nil):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("redis %s: %w", r.addr, err)
	}
	return true, nil
}
