package vault

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// DefaultMaxEntries bounds a store's records.
const DefaultMaxEntries = 100_000

// ErrFull is the error of a Put into a store that holds MaxEntries live
// records.
var ErrFull = errors.New("vault: the store is full")

// Options bound a store. A nil *Options is the zero value.
type Options struct {
	// MaxEntries bounds the records kept; a Put of a new id into a full
	// store drops the expired ones, then fails with ErrFull. Zero:
	// DefaultMaxEntries.
	MaxEntries int
	// Now is the clock. Nil: time.Now.
	Now func() time.Time
}

type entry struct {
	V   []byte    `json:"v"`
	Exp time.Time `json:"exp,omitzero"`
}

// records is the bounded map both stores keep; its methods need the
// store's lock.
type records struct {
	m   map[string]entry
	max int
	now func() time.Time
}

func newRecords(o *Options) records {
	r := records{m: map[string]entry{}, max: DefaultMaxEntries, now: time.Now}
	if o != nil && o.MaxEntries > 0 {
		r.max = o.MaxEntries
	}
	if o != nil && o.Now != nil {
		r.now = o.Now
	}
	return r
}

func (r *records) live(e entry) bool { return e.Exp.IsZero() || r.now().Before(e.Exp) }

func (r *records) get(id string) ([]byte, error) {
	e, ok := r.m[id]
	if !ok || !r.live(e) {
		return nil, ErrNotFound
	}
	return append([]byte(nil), e.V...), nil
}

// put keeps val under id, within the bound.
func (r *records) put(id string, val []byte, exp time.Time) error {
	if _, ok := r.m[id]; !ok && len(r.m) >= r.max {
		r.sweep()
		if len(r.m) >= r.max {
			return ErrFull
		}
	}
	r.m[id] = entry{V: append([]byte(nil), val...), Exp: exp}
	return nil
}

func (r *records) sweep() {
	for id, e := range r.m {
		if !r.live(e) {
			delete(r.m, id)
		}
	}
}

// guarded is a records under a lock, with the reads both stores share.
type guarded struct {
	mu sync.Mutex
	r  records
}

func (g *guarded) Get(ctx context.Context, id string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.r.get(id)
}

// MemoryStore keeps records in this process.
type MemoryStore struct{ guarded }

// Memory returns an empty MemoryStore.
func Memory(o *Options) *MemoryStore { return &MemoryStore{guarded{r: newRecords(o)}} }

func (s *MemoryStore) Put(ctx context.Context, id string, val []byte, expires time.Time) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.r.put(id, val, expires)
}

func (s *MemoryStore) Delete(ctx context.Context, id string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.r.m, id)
	return nil
}

// FileStore keeps records in one JSON file, rewritten atomically (a new
// file renamed over the old one) at every change, readable by its owner
// only. One process at a time may use a file.
type FileStore struct {
	guarded
	path string
}

// OpenFile opens the store in the file at path, creating it when it does
// not exist (its directory must). A file that is not a store is an error,
// never emptied.
func OpenFile(path string, o *Options) (*FileStore, error) {
	s := &FileStore{guarded: guarded{r: newRecords(o)}, path: path}
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		if st, derr := os.Stat(filepath.Dir(path)); derr != nil || !st.IsDir() {
			return nil, fmt.Errorf("token store %s: its directory does not exist", path)
		}
		return s, s.writeLocked()
	case err != nil:
		return nil, fmt.Errorf("token store: %w", err)
	}
	if err := json.Unmarshal(data, &s.r.m); err != nil || s.r.m == nil {
		return nil, fmt.Errorf("token store %s: not a token store (%v): move it away or name another file", path, jsonProblem(err))
	}
	s.r.sweep()
	return s, nil
}

func jsonProblem(err error) string {
	if err == nil {
		return "null"
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("invalid JSON at byte %d", se.Offset)
	}
	return "unexpected JSON"
}

// Durable reports that the records outlive the process.
func (s *FileStore) Durable() bool { return true }

func (s *FileStore) Put(ctx context.Context, id string, val []byte, expires time.Time) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old, had := s.r.m[id]
	if err := s.r.put(id, val, expires); err != nil {
		return err
	}
	if err := s.writeLocked(); err != nil {
		if had {
			s.r.m[id] = old
		} else {
			delete(s.r.m, id)
		}
		return err
	}
	return nil
}

func (s *FileStore) Delete(ctx context.Context, id string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old, had := s.r.m[id]
	if !had {
		return nil
	}
	delete(s.r.m, id)
	if err := s.writeLocked(); err != nil {
		s.r.m[id] = old
		return err
	}
	return nil
}

// writeLocked replaces the file with the records: a temporary file in the
// same directory (mode 0600), synced, renamed over the file, and the
// directory synced.
func (s *FileStore) writeLocked() error {
	data, err := json.Marshal(s.r.m)
	if err != nil {
		return err
	}
	dir := filepath.Dir(s.path)
	f, err := os.CreateTemp(dir, ".tokens-*")
	if err != nil {
		return fmt.Errorf("token store: %w", err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) // after a successful rename: gone already
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return fmt.Errorf("token store: %w", err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("token store: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("token store: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("token store: %w", err)
	}
	if err := os.Rename(tmp, s.path); err != nil {
		return fmt.Errorf("token store: %w", err)
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}
