package wiretest

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// KnownDeviation is a vector's "known_deviation" (in its options.json):
// how the implementation deviates from the contract there. Report
// tolerates the problems that contain one of Match, and only those, and
// fails once none occurs any more.
type KnownDeviation struct {
	What  string  `json:"what"`
	Match Matches `json:"match"`
}

// Matches is one string or an array of strings.
type Matches []string

// UnmarshalJSON reads a string or an array of strings.
func (m *Matches) UnmarshalJSON(b []byte) error {
	var one string
	if json.Unmarshal(b, &one) == nil {
		*m = Matches{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return errors.New("match: want a string or an array of strings")
	}
	*m = many
	return nil
}

// Check reports a deviation that does not say what it is or what it
// matches.
func (kd *KnownDeviation) Check() error {
	if kd == nil {
		return nil
	}
	if strings.TrimSpace(kd.What) == "" || len(kd.Match) == 0 {
		return errors.New("known_deviation needs what and match")
	}
	for _, m := range kd.Match {
		if strings.TrimSpace(m) == "" {
			return errors.New("known_deviation: an empty match would tolerate everything")
		}
	}
	return nil
}

// Report fails t with each problem, but for those a known deviation (kd,
// nil: none) tolerates, which are logged; and fails when kd tolerates
// none.
func Report(t testing.TB, problems []string, kd *KnownDeviation) {
	t.Helper()
	known := 0
	for _, p := range problems {
		if kd != nil && kd.tolerates(p) {
			known++
			t.Logf("known deviation (%s): %s", kd.What, p)
		} else {
			t.Error(p)
		}
	}
	if kd != nil && known == 0 {
		t.Errorf("known deviation %q no longer occurs: remove known_deviation from options.json", kd.What)
	}
}

func (kd *KnownDeviation) tolerates(p string) bool {
	for _, m := range kd.Match {
		if strings.Contains(p, m) {
			return true
		}
	}
	return false
}
