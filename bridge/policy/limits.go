package policy

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"
)

// Rate is a token bucket: Burst calls at once, then Requests per Per.
type Rate struct {
	Requests int
	Per      time.Duration
	// Burst is the bucket's capacity: how many calls may come at once
	// after a quiet while. Zero: Requests.
	Burst int
}

func (r Rate) check() error {
	switch {
	case r.Requests <= 0:
		return errors.New("requests must be a positive number of calls")
	case r.Per <= 0:
		return errors.New(`per must be a positive duration such as "1m"`)
	case r.Burst < 0:
		return errors.New("burst must not be negative")
	case float64(r.Requests)/r.Per.Seconds() > 1e6:
		return errors.New("more than a million calls a second is no limit")
	}
	return nil
}

func (r Rate) capacity() float64 {
	if r.Burst > 0 {
		return float64(r.Burst)
	}
	return float64(r.Requests)
}

func (r Rate) perSecond() float64 { return float64(r.Requests) / r.Per.Seconds() }

// String says the rate as a person would: "10 calls per minute".
func (r Rate) String() string {
	calls := strconv.Itoa(r.Requests) + " calls"
	if r.Requests == 1 {
		calls = "1 call"
	}
	per := "per " + r.Per.String()
	for _, u := range []struct {
		d    time.Duration
		name string
	}{{time.Hour, "hour"}, {time.Minute, "minute"}, {time.Second, "second"}} {
		if r.Per%u.d == 0 {
			n := int64(r.Per / u.d)
			per = "per " + u.name
			if n > 1 {
				per = "per " + strconv.FormatInt(n, 10) + " " + u.name + "s"
			}
			break
		}
	}
	s := calls + " " + per
	if r.Burst > 0 && r.Burst != r.Requests {
		s += ", " + strconv.Itoa(r.Burst) + " at once"
	}
	return s
}

// ToolRate is the rate of each caller's calls of each tool its globs
// name ("*": any characters).
type ToolRate struct {
	Tools []string
	Rate
}

// Limits are the rate limits of a front: a bucket per principal, and one
// per (principal, upstream, tool) for the tools of the first ToolRate
// whose globs name the tool. A nil *Limits limits nothing.
type Limits struct {
	Principal *Rate
	Tools     []ToolRate
}

// NewLimits checks the rates and returns the limits they make.
func NewLimits(principal *Rate, tools []ToolRate) (*Limits, error) {
	l := &Limits{}
	if principal != nil {
		if err := principal.check(); err != nil {
			return nil, fmt.Errorf("per principal: %w", err)
		}
		p := *principal
		l.Principal = &p
	}
	for i, t := range tools {
		if err := t.check(); err != nil {
			return nil, fmt.Errorf("per tool %d: %w", i, err)
		}
		if len(t.Tools) == 0 || slices.Contains(t.Tools, "") {
			return nil, fmt.Errorf("per tool %d: tools must name the tools (globs such as \"search_*\" or \"*\")", i)
		}
		t.Tools = slices.Clone(t.Tools)
		l.Tools = append(l.Tools, t)
	}
	return l, nil
}

// toolRate is the rate of tool's calls per caller, nil when none applies.
func (l *Limits) toolRate(tool string) *Rate {
	for i := range l.Tools {
		if anyGlob(l.Tools[i].Tools, tool) {
			return &l.Tools[i].Rate
		}
	}
	return nil
}
