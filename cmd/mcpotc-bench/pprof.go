package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// profileSeconds is how long each CPU profile of --pprof runs.
const profileSeconds = 5

// profileWhile (with --pprof) repeats work while a CPU profile of the
// process name runs, then takes heap and allocs snapshots. Files are
// <dir>/<label>.{cpu,heap,allocs}.pprof; read them with
// go tool pprof <dir>/mcpotc <file>.
func (b *bench) profileWhile(name, label string, work func() error) error {
	if b.cfg.Pprof == "" {
		return nil
	}
	addr := b.pprofAddr[name]
	if addr == "" {
		return fmt.Errorf("--pprof: %s has no pprof address", name)
	}
	b.progress("profiling %s (%s) for %ds", name, label, profileSeconds)
	base := filepath.Join(b.cfg.Pprof, label)
	done := make(chan error, 1)
	go func() {
		done <- fetchTo(b.ctx, fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", addr, profileSeconds), base+".cpu.pprof")
	}()
	var werr error
	for {
		select {
		case err := <-done:
			if err != nil {
				return err
			}
			if werr != nil {
				return fmt.Errorf("--pprof %s: the load failed: %w", label, werr)
			}
			for _, kind := range []string{"heap", "allocs"} {
				if err := fetchTo(b.ctx, fmt.Sprintf("http://%s/debug/pprof/%s", addr, kind), base+"."+kind+".pprof"); err != nil {
					return err
				}
			}
			return nil
		default:
		}
		if werr == nil {
			werr = work()
		} else {
			time.Sleep(10 * time.Millisecond)
		}
	}
}

func fetchTo(ctx context.Context, url, path string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("GET %s: %d %s", url, resp.StatusCode, strings.TrimSpace(string(body)))
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// loadAt is work for profileWhile: a batch of calls at concurrency c.
func (b *bench) loadAt(c int, call callFunc) func() error {
	return func() error {
		s := drive(b.ctx, 20*c, c, call)
		return s.first
	}
}

// profileFronts profiles both fronts under the hop rows' load at c=1 and
// c=64.
func (b *bench) profileFronts() error {
	if b.cfg.Pprof == "" {
		return nil
	}
	c, err := b.otc(b.otcFrontBase)
	if err != nil {
		return err
	}
	echoValue, _ := json.Marshal(hopMessage)
	for _, conc := range []int{1, 64} {
		sfx := fmt.Sprintf("-c%d", conc)
		if err := b.profileWhile("serve-otc", "serve-otc"+sfx,
			b.loadAt(conc, otcCaller(c, "Sample.echo@1.0.0", echoArgs, wantValue(echoValue)))); err != nil {
			return err
		}
		if err := b.profileWhile("serve-mcp http", "serve-mcp-http"+sfx,
			b.loadAt(conc, mcpCaller(b.mcpHTTP, "Calculator_Add", addArgs, wantText(`{"sum":5}`)))); err != nil {
			return err
		}
		if err := b.profileWhile("serve-mcp stdio", "serve-mcp-stdio"+sfx,
			b.loadAt(conc, mcpCaller(b.mcpFrontStdio, "Calculator_Add", addArgs, wantText(`{"sum":5}`)))); err != nil {
			return err
		}
	}
	return nil
}
