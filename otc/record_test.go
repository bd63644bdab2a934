package otc

import (
	"context"
	"encoding/json"
	"testing"
)

// A CallRecord names the caller the transport authentication established,
// the stated user id and the input as sent, for every answer: a call that
// ran, and one refused before its tool (unknown, invalid input).
func TestCallRecordNamesTheCaller(t *testing.T) {
	var recs []*CallRecord
	h := newTestHandler(t, &Options{APIKey: "k", Observe: func(r *CallRecord) { recs = append(recs, r) }},
		testTool("T.X@1.0.0", func(context.Context, *Call) (json.RawMessage, error) { return nil, nil }))
	hdr := map[string]string{"OXP-Version": "1.0", "Content-Type": "application/json", "OXP-API-Key": "k"}
	for _, body := range []string{
		`{"tool_id":"T.X","call_id":"c1","input":{"x":1},"context":{"user_id":"alice"}}`,
		`{"tool_id":"T.Nope","call_id":"c2","input":{"x":1},"context":{"user_id":"alice"}}`,
		`{"tool_id":"T.X","call_id":"c3","input":{"x":"one"},"context":{"user_id":"alice"}}`,
	} {
		do(t, h, "POST", "/tools/call", hdr, body)
	}
	if len(recs) != 3 {
		t.Fatalf("%d records, want 3", len(recs))
	}
	for i, r := range recs {
		if r.Caller.ID != CallerAPIKey || !r.Caller.Authenticated || r.UserID != "alice" || len(r.Input) == 0 {
			t.Errorf("record %d (%s): caller %+v, user %q, input %s", i, r.Outcome, r.Caller, r.UserID, r.Input)
		}
	}
}
