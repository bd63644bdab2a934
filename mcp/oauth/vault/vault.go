package vault

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Key names one record.
type Key struct {
	// Kind is what the record is: "" for a token, or another name for
	// other records kept beside the tokens (a pending authorization).
	Kind     string
	Upstream string // the upstream's name in the configuration
	User     string // "" for the bridge's own (shared) identity
}

// Errors of Get.
var (
	// ErrNotFound: no record, or it expired.
	ErrNotFound = errors.New("vault: no such record")
	// ErrCorrupt: a record is there but does not open under this key and
	// Key (another vault key, a record moved to another slot, damage).
	ErrCorrupt = errors.New("vault: record does not decrypt")
)

// Store keeps sealed records by opaque id.
type Store interface {
	// Get returns the record of id, or ErrNotFound when there is none or
	// it expired.
	Get(ctx context.Context, id string) ([]byte, error)
	// Put keeps val under id until expires (zero: no expiry).
	Put(ctx context.Context, id string, val []byte, expires time.Time) error
	// Delete forgets id; an absent id is not an error.
	Delete(ctx context.Context, id string) error
}

// durable is implemented by a Store whose records outlive the process: it
// needs a key that does too.
type durable interface{ Durable() bool }

// KeySize is the size of a vault key.
const KeySize = 32

// version is the first byte of a sealed record: the sealing scheme.
const version byte = 1

// Vault seals records with its key and keeps them in a Store. Safe for
// concurrent use when its Store is.
type Vault struct {
	store Store
	aead  cipher.AEAD
	idKey []byte
}

// New returns a Vault over store. key must be KeySize bytes; nil draws a
// random key, valid for this process only, which a durable store (a file)
// refuses.
func New(store Store, key []byte) (*Vault, error) {
	if store == nil {
		return nil, errors.New("vault: no store")
	}
	if key == nil {
		if d, ok := store.(durable); ok && d.Durable() {
			return nil, errors.New("vault: a store that outlives the process needs a key (--token-key-env)")
		}
		key = make([]byte, KeySize)
		if _, err := rand.Read(key); err != nil {
			return nil, err
		}
	}
	if len(key) != KeySize {
		return nil, fmt.Errorf("vault: the key must be %d bytes, not %d", KeySize, len(key))
	}
	encKey, err := hkdf.Key(sha256.New, key, nil, "mcpotc vault v1 seal", KeySize)
	if err != nil {
		return nil, err
	}
	idKey, err := hkdf.Key(sha256.New, key, nil, "mcpotc vault v1 id", KeySize)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(encKey)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &Vault{store: store, aead: aead, idKey: idKey}, nil
}

// ParseKey reads a vault key written as base64 (standard or URL alphabet,
// padded or not) or hex. Its errors never quote s.
func ParseKey(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	for _, dec := range []func(string) ([]byte, error){
		hex.DecodeString,
		base64.StdEncoding.DecodeString, base64.RawStdEncoding.DecodeString,
		base64.URLEncoding.DecodeString, base64.RawURLEncoding.DecodeString,
	} {
		if k, err := dec(s); err == nil && len(k) == KeySize {
			return k, nil
		}
	}
	return nil, fmt.Errorf("not a %d-byte key in base64 or hex (make one with: openssl rand -base64 %d)", KeySize, KeySize)
}

// aad is the additional data that binds a record to its Key.
func aad(k Key) []byte {
	if k.Kind == "" {
		// The form of the records sealed before Key had a Kind.
		b, _ := json.Marshal([2]string{k.Upstream, k.User})
		return b
	}
	b, _ := json.Marshal([3]string{k.Kind, k.Upstream, k.User})
	return b
}

// id is the Store id of k.
func (v *Vault) id(k Key) string {
	m := hmac.New(sha256.New, v.idKey)
	m.Write(aad(k))
	return hex.EncodeToString(m.Sum(nil))
}

// Get opens the record of k into dst (decoded from JSON).
func (v *Vault) Get(ctx context.Context, k Key, dst any) error {
	sealed, err := v.store.Get(ctx, v.id(k))
	if err != nil {
		return err
	}
	return v.open(sealed, k, dst)
}

// open reads a sealed record of k into dst.
func (v *Vault) open(sealed []byte, k Key, dst any) error {
	ns := v.aead.NonceSize()
	if len(sealed) < 1+ns || sealed[0] != version {
		return ErrCorrupt
	}
	plain, err := v.aead.Open(nil, sealed[1:1+ns], sealed[1+ns:], aad(k))
	if err != nil {
		return ErrCorrupt
	}
	if err := json.Unmarshal(plain, dst); err != nil {
		return ErrCorrupt
	}
	return nil
}

// Put seals rec (encoded as JSON) as the record of k, kept until expires
// (zero: no expiry).
func (v *Vault) Put(ctx context.Context, k Key, rec any, expires time.Time) error {
	sealed, err := v.seal(k, rec)
	if err != nil {
		return err
	}
	return v.store.Put(ctx, v.id(k), sealed, expires)
}

// seal is rec sealed as the record of k.
func (v *Vault) seal(k Key, rec any) ([]byte, error) {
	plain, err := json.Marshal(rec)
	if err != nil {
		return nil, fmt.Errorf("vault: %w", err)
	}
	nonce := make([]byte, v.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	sealed := append([]byte{version}, nonce...)
	return v.aead.Seal(sealed, nonce, plain, aad(k)), nil
}

// Delete forgets the record of k.
func (v *Vault) Delete(ctx context.Context, k Key) error {
	return v.store.Delete(ctx, v.id(k))
}
