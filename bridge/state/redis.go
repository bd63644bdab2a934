package state

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/mcpotc/mcpotc/mcp/oauth/vault"
	"github.com/mcpotc/mcpotc/otc"
	"github.com/redis/go-redis/v9"
)

// Default client timeouts, where the URL sets none (its dial_timeout,
// read_timeout, write_timeout and pool_timeout query parameters).
const (
	DefaultDialTimeout = 2 * time.Second
	DefaultIOTimeout   = time.Second
	DefaultPoolTimeout = 2 * time.Second
)

// MaxRecordTTL bounds how long a token record that names no expiry (it
// holds a refresh token) stays in Redis without being written again; a
// refresh writes it again.
const MaxRecordTTL = 30 * 24 * time.Hour

// keyPrefix starts every key.
const keyPrefix = "mcpotc:"

// Options configure Open. A nil *Options is the zero value.
type Options struct {
	// Password, when set, replaces the URL's password (from the
	// environment, so that it is not in a command line).
	Password string
}

// Redis is a connection pool to one Redis server. It implements
// otc.IdempotencyStore and vault.Store; safe for concurrent use.
type Redis struct {
	c    *redis.Client
	addr string
}

var (
	_ otc.IdempotencyStore = (*Redis)(nil)
	_ vault.Store          = (*Redis)(nil)
)

// Open returns a pool for a redis:// (rediss:// for TLS, unix:// for a
// socket) URL, as go-redis's ParseURL reads it. It does not connect: Ping
// does. Its errors never quote a password.
func Open(rawURL string, o *Options) (*Redis, error) {
	if o == nil {
		o = &Options{}
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, errors.New("not a URL (want redis://HOST:PORT/DB, rediss:// for TLS)")
	}
	switch u.Scheme {
	case "redis", "rediss", "unix":
	default:
		return nil, fmt.Errorf("scheme %q: want redis://, rediss:// (TLS) or unix://", u.Scheme)
	}
	opts, err := redis.ParseURL(rawURL)
	if err != nil {
		return nil, fmt.Errorf("%s: %s", redacted(u), strings.ReplaceAll(err.Error(), rawURL, redacted(u)))
	}
	q := u.Query()
	if !q.Has("dial_timeout") {
		opts.DialTimeout = DefaultDialTimeout
	}
	if !q.Has("read_timeout") {
		opts.ReadTimeout = DefaultIOTimeout
	}
	if !q.Has("write_timeout") {
		opts.WriteTimeout = DefaultIOTimeout
	}
	if !q.Has("pool_timeout") {
		opts.PoolTimeout = DefaultPoolTimeout
	}
	if !q.Has("max_retries") {
		opts.MaxRetries = 1
	}
	if o.Password != "" {
		opts.Password = o.Password
	}
	if opts.TLSConfig != nil && opts.TLSConfig.MinVersion < tls.VersionTLS12 {
		opts.TLSConfig.MinVersion = tls.VersionTLS12
	}
	return &Redis{c: redis.NewClient(opts), addr: redacted(u)}, nil
}

// redacted is u without its password, for messages.
func redacted(u *url.URL) string {
	c := *u
	c.RawQuery = ""
	return c.Redacted()
}

// String is the server's URL without a password.
func (r *Redis) String() string { return r.addr }

// Ping checks that the server answers (readiness).
func (r *Redis) Ping(ctx context.Context) error {
	if err := r.c.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("redis %s: %w", r.addr, err)
	}
	return nil
}

// Close closes the pool.
func (r *Redis) Close() error { return r.c.Close() }

// Durable reports that records outlive the process (vault: a key that
// does too is required).
func (r *Redis) Durable() bool { return true }

// claimScript stores ARGV[1] under KEYS[1] for ARGV[3] ms, and its lease
// mark KEYS[2] for ARGV[2] ms, unless KEYS[1] holds a value: then it
// returns that value and whether the lease mark is there (1 or 0). The
// lease lives in Redis's own clock: replicas' clocks do not matter.
var claimScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if v then return {v, redis.call('EXISTS', KEYS[2])} end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[3])
redis.call('SET', KEYS[2], '1', 'PX', ARGV[2])
return false
`)

// settleScript replaces KEYS[1], if it holds exactly ARGV[1], with ARGV[2]
// for ARGV[3] ms, or deletes it when ARGV[3] is 0, and ends the lease
// KEYS[2]; 1 if it did.
var settleScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if ARGV[3] == '0' then redis.call('DEL', KEYS[1]) else redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3]) end
redis.call('DEL', KEYS[2])
return 1
`)

// idemKeys are the Redis keys of an idempotency key: its value and its
// lease mark, in one hash slot (Redis Cluster runs a script on one slot).
func idemKeys(key string) []string {
	k := keyPrefix + "{" + key + "}"
	return []string{k, k + ":lease"}
}

// Claim implements otc.IdempotencyStore.
func (r *Redis) Claim(ctx context.Context, key string, claim []byte, lease, remember time.Duration) ([]byte, bool, error) {
	v, err := claimScript.Run(ctx, r.c, idemKeys(key), claim, max(lease.Milliseconds(), 1), max((lease+remember).Milliseconds(), 1)).Result()
	switch {
	case errors.Is(err, redis.Nil):
		return nil, false, nil
	case err != nil:
		return nil, false, fmt.Errorf("redis %s: %w", r.addr, err)
	}
	pair, ok := v.([]any)
	if !ok || len(pair) != 2 {
		return nil, false, fmt.Errorf("redis %s: claim answered %T", r.addr, v)
	}
	s, ok1 := pair[0].(string)
	live, ok2 := pair[1].(int64)
	if !ok1 || !ok2 {
		return nil, false, fmt.Errorf("redis %s: claim answered %T, %T", r.addr, pair[0], pair[1])
	}
	return []byte(s), live == 1, nil
}

// Settle implements otc.IdempotencyStore.
func (r *Redis) Settle(ctx context.Context, key string, claim, answer []byte, ttl time.Duration) (bool, error) {
	ms := int64(0)
	if answer != nil {
		ms = max(ttl.Milliseconds(), 1)
	}
	n, err := settleScript.Run(ctx, r.c, idemKeys(key), claim, answer, ms).Int()
	if err != nil {
		return false, fmt.Errorf("redis %s: %w", r.addr, err)
	}
	return n == 1, nil
}

// Get implements vault.Store.
func (r *Redis) Get(ctx context.Context, id string) ([]byte, error) {
	b, err := r.c.Get(ctx, keyPrefix+"vault:"+id).Bytes()
	switch {
	case errors.Is(err, redis.Nil):
		return nil, vault.ErrNotFound
	case err != nil:
		return nil, fmt.Errorf("redis %s: %w", r.addr, err)
	}
	return b, nil
}

// Put implements vault.Store: the record expires at expires, or
// MaxRecordTTL after this write when expires is zero.
func (r *Redis) Put(ctx context.Context, id string, val []byte, expires time.Time) error {
	ttl := MaxRecordTTL
	if !expires.IsZero() {
		ttl = time.Until(expires)
		if ttl <= 0 {
			return r.Delete(ctx, id)
		}
		ttl = min(ttl, MaxRecordTTL)
	}
	if err := r.c.Set(ctx, keyPrefix+"vault:"+id, val, ttl).Err(); err != nil {
		return fmt.Errorf("redis %s: %w", r.addr, err)
	}
	return nil
}

// Delete implements vault.Store.
func (r *Redis) Delete(ctx context.Context, id string) error {
	if err := r.c.Del(ctx, keyPrefix+"vault:"+id).Err(); err != nil {
		return fmt.Errorf("redis %s: %w", r.addr, err)
	}
	return nil
}
