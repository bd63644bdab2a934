package main

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// callFunc makes one measured call; an error fails the call.
type callFunc func(ctx context.Context) error

// sample is what one measured run produced.
type sample struct {
	calls   int             // calls made (measured, warm-up excluded)
	errors  int             // of which failed
	first   error           // the first failure
	elapsed time.Duration   // from the first call's start to the last call's end
	lat     []time.Duration // one per successful call, unsorted
}

// run warms up with warmup calls, then makes calls calls with concurrency
// workers: each worker takes the next call as soon as its previous one
// ended. Warm-up failures count as failures too: a bench that cannot warm
// up measures nothing. before, when set, runs between the warm-up and the
// measured calls (to reset a peak RSS).
func run(ctx context.Context, calls, warmup, concurrency int, before func(), call callFunc) sample {
	if concurrency < 1 {
		concurrency = 1
	}
	if warmup > 0 {
		w := drive(ctx, warmup, min(concurrency, warmup), call)
		if w.errors > 0 {
			w.lat = nil
			w.calls = 0
			return w
		}
	}
	if before != nil {
		before()
	}
	return drive(ctx, calls, concurrency, call)
}

func drive(ctx context.Context, calls, concurrency int, call callFunc) sample {
	lat := make([]time.Duration, calls)
	ok := make([]bool, calls)
	var next atomic.Int64
	var mu sync.Mutex
	var firstErr error
	var failed atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range min(concurrency, calls) {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= calls || ctx.Err() != nil {
					return
				}
				t0 := time.Now()
				err := call(ctx)
				lat[i] = time.Since(t0)
				if err != nil {
					failed.Add(1)
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					continue
				}
				ok[i] = true
			}
		})
	}
	wg.Wait()
	s := sample{calls: calls, errors: int(failed.Load()), first: firstErr, elapsed: time.Since(start)}
	if err := ctx.Err(); err != nil && s.first == nil {
		s.first = err
		s.errors = calls - countTrue(ok)
	}
	for i, d := range lat {
		if ok[i] {
			s.lat = append(s.lat, d)
		}
	}
	return s
}

func countTrue(b []bool) int {
	n := 0
	for _, v := range b {
		if v {
			n++
		}
	}
	return n
}

// burst makes n calls all at once (each in its own goroutine, released
// together), rounds times, and merges the rounds: elapsed is their sum.
func burst(ctx context.Context, n, rounds int, before func(), call callFunc) sample {
	var all sample
	if before != nil {
		before()
	}
	for range rounds {
		s := drive(ctx, n, n, call)
		all.calls += s.calls
		all.errors += s.errors
		if all.first == nil {
			all.first = s.first
		}
		all.elapsed += s.elapsed
		all.lat = append(all.lat, s.lat...)
	}
	return all
}

// percentile returns the p-th percentile (0 < p ≤ 100) of d by the
// nearest-rank method; d is sorted in place.
func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	rank := int(math.Ceil(p / 100 * float64(len(d))))
	return d[min(max(rank, 1), len(d))-1]
}

// rate is events per second.
func rate(n int, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// fmtDur prints a latency with three significant digits.
func fmtDur(d time.Duration) string {
	switch {
	case d <= 0:
		return "-"
	case d < time.Millisecond:
		return fmt.Sprintf("%.0fµs", float64(d)/float64(time.Microsecond))
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond))
	case d < time.Second:
		return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
	default:
		return fmt.Sprintf("%.2fs", d.Seconds())
	}
}

// fmtKiB prints a size given in KiB.
func fmtKiB(kib int64) string {
	switch {
	case kib <= 0:
		return "-"
	case kib < 10<<10:
		return fmt.Sprintf("%.1f MiB", float64(kib)/1024)
	default:
		return fmt.Sprintf("%.0f MiB", float64(kib)/1024)
	}
}
