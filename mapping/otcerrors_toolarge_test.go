package mapping

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/mcpotc/mcpotc/mcp/upstream"
)

// An answer over the message limit is a 200 success:false that names the
// limit and how to raise it, and is not retryable.
func TestOTCErrorTooLarge(t *testing.T) {
	err := fmt.Errorf("calling: %w", &upstream.TooLargeError{Upstream: "big", Tool: "dump", Limit: 16 << 20, Size: 209715250})
	got, merr := json.Marshal(OTCError(err))
	if merr != nil {
		t.Fatal(merr)
	}
	want := `{"message":"The tool's answer is larger than the bridge's limit of 16777216 bytes per message",` +
		`"developer_message":"calling: mcp: the answer to \"dump\" of upstream \"big\" (209715250 bytes) is longer than the 16777216-byte message limit (MaxMessageBytes); it was dropped; ` +
		`raise the limit with serve-otc --max-message-bytes, or max_message_bytes of this server in the config file"}`
	if string(got) != want {
		t.Errorf("OTC error\n%s\nwant\n%s", got, want)
	}
}
