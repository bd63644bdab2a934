package state

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcpotc/mcpotc/bridge/policy"
)

var _ policy.Store = (*Redis)(nil)

// bucketScript is policy.Store's Take for the buckets KEYS, atomically: each
// bucket is a hash {tokens, at} refilled from at to now (ms, Redis's own
// clock: the replicas' clocks do not matter) at ARGV[2i] tokens a
// millisecond up to ARGV[2i-1]; a bucket not there is full. When each
// holds a token, one is taken from each and the script answers {1, 0,
// -1}; else none is taken and it answers {0, the longest wait in ms, the
// 0-based index of the bucket that needs it}. A bucket expires once it
// would be full again (a full bucket is the same as none).
var bucketScript = redis.NewScript(`
if redis.replicate_commands then redis.replicate_commands() end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local tokens = {}
local wait, refused = 0, -1
for i = 1, #KEYS do
  local cap, rate = tonumber(ARGV[2*i-1]), tonumber(ARGV[2*i])
  local v = redis.call('HMGET', KEYS[i], 'tokens', 'at')
  local tk, at = tonumber(v[1]), tonumber(v[2])
  if tk == nil or at == nil then tk, at = cap, now end
  if now > at then tk = tk + (now - at) * rate end
  if tk > cap then tk = cap end
  tokens[i] = tk
  if tk < 1 then
    local w = math.ceil((1 - tk) / rate)
    if w > wait then wait, refused = w, i - 1 end
  end
end
if refused >= 0 then return {0, wait, refused} end
for i = 1, #KEYS do
  local cap, rate = tonumber(ARGV[2*i-1]), tonumber(ARGV[2*i])
  redis.call('HSET', KEYS[i], 'tokens', tostring(tokens[i] - 1), 'at', tostring(now))
  redis.call('PEXPIRE', KEYS[i], math.ceil(cap / rate) + 1000)
end
return {1, 0, -1}
`)

// Take implements policy.Store: the buckets are "mcpotc:rl:" and their
// keys (hashes only; a principal's buckets in one hash slot).
func (r *Redis) Take(ctx context.Context, buckets []policy.Bucket) (time.Duration, int, error) {
	keys := make([]string, len(buckets))
	args := make([]any, 0, 2*len(buckets))
	for i, b := range buckets {
		keys[i] = keyPrefix + "rl:" + b.Key
		args = append(args, strconv.FormatFloat(b.Capacity, 'g', -1, 64), strconv.FormatFloat(b.PerSecond/1000, 'g', -1, 64))
	}
	v, err := bucketScript.Run(ctx, r.c, keys, args...).Result()
	if err != nil {
		return 0, -1, fmt.Errorf("redis %s: %w", r.addr, err)
	}
	answer, ok := v.([]any)
	if !ok || len(answer) != 3 {
		return 0, -1, fmt.Errorf("redis %s: the rate limit script answered %T", r.addr, v)
	}
	took, ok1 := answer[0].(int64)
	wait, ok2 := answer[1].(int64)
	refused, ok3 := answer[2].(int64)
	if !ok1 || !ok2 || !ok3 || took == 0 && (refused < 0 || int(refused) >= len(buckets)) {
		return 0, -1, fmt.Errorf("redis %s: the rate limit script answered %v", r.addr, answer)
	}
	if took == 1 {
		return 0, -1, nil
	}
	return time.Duration(wait) * time.Millisecond, int(refused), nil
}
