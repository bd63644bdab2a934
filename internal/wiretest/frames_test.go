package wiretest

import (
	"encoding/json"
	"strings"
	"testing"
)

// Each case has its own name, a frame that is JSON, and an answer that is
// a -32600 error without an id.
func TestInvalidRequests(t *testing.T) {
	names := map[string]bool{}
	for _, tc := range InvalidRequests {
		if names[tc.Name] {
			t.Errorf("%s: two cases of that name", tc.Name)
		}
		names[tc.Name] = true
		if !json.Valid([]byte(tc.Frame)) {
			t.Errorf("%s: the frame %q is not JSON", tc.Name, tc.Frame)
		}
		var want struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      json.RawMessage `json:"id"`
			Error   struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := DecodeStrict([]byte(tc.Want), &want); err != nil {
			t.Errorf("%s: the answer %q: %v", tc.Name, tc.Want, err)
			continue
		}
		if want.JSONRPC != "2.0" || string(want.ID) != "null" || want.Error.Code != -32600 || !strings.HasPrefix(want.Error.Message, "Invalid Request: ") {
			t.Errorf("%s: the answer %s is not a -32600 Invalid Request with a null id", tc.Name, tc.Want)
		}
	}
}
