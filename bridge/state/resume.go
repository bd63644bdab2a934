package state

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// The records of calls that wait for a user to open a URL (the OTC front's
// bridge.ResumeStore: see bridge/resume.go), shared by the replicas.
//
// Keys, all in one Redis Cluster hash slot ({resume}):
//
//	mcpotc:{resume}:rec:<id>     "<owner>\n<value>", expiring
//	mcpotc:{resume}:own:<owner>  sorted set: the owner's ids by expiry
//	mcpotc:{resume}:all          sorted set: "<owner> <id>" by expiry
//
// The sorted sets make the bounds (per owner, in all: the oldest go) and
// forget what expired; every key expires (the sets with their newest
// record); every change runs as one script, so replicas never see half of
// one. Owners and ids are the bridge's hashes and random ids:
// no identity of a caller is written.
const resumePrefix = keyPrefix + "{resume}:"

var keepScript = redis.NewScript(`
local prefix, owner, id, val = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local ttl, perOwner, total = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local all = prefix .. 'all'
local function drop(o, i)
  redis.call('DEL', prefix .. 'rec:' .. i)
  redis.call('ZREM', prefix .. 'own:' .. o, i)
  redis.call('ZREM', all, o .. ' ' .. i)
end
local function dropMember(m)
  local sp = string.find(m, ' ', 1, true)
  if sp then drop(string.sub(m, 1, sp - 1), string.sub(m, sp + 1)) else redis.call('ZREM', all, m) end
end
for _, m in ipairs(redis.call('ZRANGEBYSCORE', all, '-inf', now)) do dropMember(m) end
local own = prefix .. 'own:' .. owner
redis.call('ZREMRANGEBYSCORE', own, '-inf', now)
drop(owner, id)
if perOwner > 0 then
  while redis.call('ZCARD', own) >= perOwner do
    drop(owner, redis.call('ZRANGE', own, 0, 0)[1])
  end
end
if total > 0 then
  while redis.call('ZCARD', all) >= total do
    dropMember(redis.call('ZRANGE', all, 0, 0)[1])
  end
end
redis.call('SET', prefix .. 'rec:' .. id, owner .. '\n' .. val, 'PX', ttl)
redis.call('ZADD', own, now + ttl, id)
redis.call('PEXPIRE', own, ttl)
redis.call('ZADD', all, now + ttl, owner .. ' ' .. id)
redis.call('PEXPIRE', all, ttl)
return 1
`)

var takeScript = redis.NewScript(`
local prefix, id = ARGV[1], ARGV[2]
local v = redis.call('GET', prefix .. 'rec:' .. id)
if not v then return false end
redis.call('DEL', prefix .. 'rec:' .. id)
local nl = string.find(v, '\n', 1, true)
local owner = string.sub(v, 1, nl - 1)
redis.call('ZREM', prefix .. 'own:' .. owner, id)
redis.call('ZREM', prefix .. 'all', owner .. ' ' .. id)
return string.sub(v, nl + 1)
`)

var updateScript = redis.NewScript(`
local prefix, id, val = ARGV[1], ARGV[2], ARGV[3]
local v = redis.call('GET', prefix .. 'rec:' .. id)
if not v then return 0 end
local nl = string.find(v, '\n', 1, true)
redis.call('SET', prefix .. 'rec:' .. id, string.sub(v, 1, nl) .. val, 'KEEPTTL')
return 1
`)

// Resumes is the bridge.ResumeStore of these records, on r's pool.
func (r *Redis) Resumes() *Resumes { return &Resumes{r} }

// Resumes keeps the OTC front's records of calls that wait for a user in
// Redis: a bridge.ResumeStore (its methods' contract is there).
type Resumes struct{ r *Redis }

// Keep implements bridge.ResumeStore.
func (s *Resumes) Keep(ctx context.Context, owner, id string, val []byte, ttl time.Duration, perOwner, total int) error {
	if strings.ContainsAny(owner, " \n") || strings.ContainsAny(id, " \n") || owner == "" || id == "" {
		return errors.New("state: a resume owner or id holds a space or a newline")
	}
	err := keepScript.Run(ctx, s.r.c, []string{resumePrefix + "all"}, resumePrefix, owner, id, val,
		max(ttl.Milliseconds(), 1), perOwner, total).Err()
	if err != nil {
		return fmt.Errorf("redis %s: %w", s.r.addr, err)
	}
	return nil
}

// Take implements bridge.ResumeStore.
func (s *Resumes) Take(ctx context.Context, id string) ([]byte, error) {
	v, err := takeScript.Run(ctx, s.r.c, []string{resumePrefix + "all"}, resumePrefix, id).Text()
	switch {
	case errors.Is(err, redis.Nil):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("redis %s: %w", s.r.addr, err)
	}
	return []byte(v), nil
}

// Get implements bridge.ResumeStore.
func (s *Resumes) Get(ctx context.Context, id string) ([]byte, error) {
	v, err := s.r.c.Get(ctx, resumePrefix+"rec:"+id).Bytes()
	switch {
	case errors.Is(err, redis.Nil):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("redis %s: %w", s.r.addr, err)
	}
	_, val, ok := strings.Cut(string(v), "\n")
	if !ok {
		return nil, nil
	}
	return []byte(val), nil
}

// Update implements bridge.ResumeStore.
func (s *Resumes) Update(ctx context.Context, id string, val []byte) (bool, error) {
	n, err := updateScript.Run(ctx, s.r.c, []string{resumePrefix + "all"}, resumePrefix, id, val).Int()
	if err != nil {
		return false, fmt.Errorf("redis %s: %w", s.r.addr, err)
	}
	return n == 1, nil
}
