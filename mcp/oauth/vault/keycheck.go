package vault

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"time"
)

// keyCheckKind is the Kind of the record CheckKey keeps: one per store,
// sealed like every record, so that a store opened with another key is
// told apart from an empty one.
const keyCheckKind = "key-check"

// ErrWrongKey is the error of CheckKey for a store whose records were
// sealed under another vault key.
var ErrWrongKey = errors.New("vault: the store's records were sealed with another key")

type keyCheck struct {
	Created time.Time `json:"created"`
}

// CheckKey tells whether the store's records open under this vault's key:
// it reads the store's key-check record, and writes one when there is none
// (a new store, or one from before this record existed). A record that
// does not open is ErrWrongKey: every token in the store would read as
// absent, and every user would have to authorize again, so the caller
// should refuse to start rather than go on (docs/otc-front.md, OAuth-protected MCP servers).
func (v *Vault) CheckKey(ctx context.Context) error {
	sealed, err := v.store.Get(ctx, keyCheckID)
	switch {
	case err == nil:
		var kc keyCheck
		if v.open(sealed, Key{Kind: keyCheckKind}, &kc) != nil {
			return ErrWrongKey
		}
		return nil
	case errors.Is(err, ErrNotFound):
		sealed, err := v.seal(Key{Kind: keyCheckKind}, keyCheck{Created: time.Now().UTC()})
		if err == nil {
			err = v.store.Put(ctx, keyCheckID, sealed, time.Time{})
		}
		if err != nil {
			return fmt.Errorf("vault: writing the key-check record: %w", err)
		}
		return nil
	default:
		return err
	}
}

// keyCheckID is the store id of the key-check record: the same whatever
// the key (the other records' ids are keyed, so another key would look
// for it elsewhere), and never a keyed id (those are hex digests).
const keyCheckID = "mcpotc-key-check"

// Sum is an HMAC-SHA256 of data under a key derived from the vault key for
// label: the same on every replica that shares the vault key, and of no
// use to forge another label's sums.
func (v *Vault) Sum(label string, data ...[]byte) []byte {
	m := hmac.New(sha256.New, v.derive("mcpotc vault v1 mac "+label))
	for _, d := range data {
		// Length-prefixed, so that ("ab","c") and ("a","bc") differ.
		var n [8]byte
		for i, l := 0, uint64(len(d)); i < 8; i++ {
			n[i] = byte(l >> (8 * i))
		}
		m.Write(n[:])
		m.Write(d)
	}
	return m.Sum(nil)
}

// Seal encrypts and authenticates plain under a key derived for label
// (AES-256-GCM), for values the bridge hands out and reads back (a
// browser cookie): only a holder of the vault key can read or make one.
func (v *Vault) Seal(label string, plain []byte) []byte {
	aead := v.labelAEAD(label)
	nonce := make([]byte, aead.NonceSize())
	_, _ = rand.Read(nonce)
	return aead.Seal(nonce, nonce, plain, []byte(label))
}

// Open reverses Seal; an error for anything Seal of the same label and
// vault key did not make.
func (v *Vault) Open(label string, sealed []byte) ([]byte, error) {
	aead := v.labelAEAD(label)
	ns := aead.NonceSize()
	if len(sealed) < ns {
		return nil, ErrCorrupt
	}
	plain, err := aead.Open(nil, sealed[:ns], sealed[ns:], []byte(label))
	if err != nil {
		return nil, ErrCorrupt
	}
	return plain, nil
}

func (v *Vault) labelAEAD(label string) cipher.AEAD {
	block, _ := aes.NewCipher(v.derive("mcpotc vault v1 seal " + label)) // 32 bytes: cannot fail
	aead, _ := cipher.NewGCM(block)
	return aead
}

// derive is a key for info, derived from the vault's id key (itself
// derived from the vault key; the records' sealing key is never reused).
func (v *Vault) derive(info string) []byte {
	k, _ := hkdf.Key(sha256.New, v.idKey, nil, info, KeySize)
	return k
}
