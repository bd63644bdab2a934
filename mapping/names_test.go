package mapping

import (
	"reflect"
	"strings"
	"testing"

	"github.com/mcpotc/mcpotc/otc"
)

func TestOTCIdentities(t *testing.T) {
	long := strings.Repeat("x", 70)
	got := OTCIdentities("everything", "2.0.0", []string{"get-sum", "echo", "get_sum", "Echo", long, "trigger.url-elicitation"})
	want := []OTCIdentity{
		{MCPName: "get-sum", ID: "everything.get_sum" + hashSuffix("everything.get-sum") + "@2.0.0", Name: "everything_get_sum" + hashSuffix("everything.get-sum")},
		{MCPName: "echo", ID: "everything.echo" + hashSuffix("everything.echo") + "@2.0.0", Name: "everything_echo" + hashSuffix("everything.echo")},
		{MCPName: "get_sum", ID: "everything.get_sum" + hashSuffix("everything.get_sum") + "@2.0.0", Name: "everything_get_sum" + hashSuffix("everything.get_sum")},
		{MCPName: "Echo", ID: "everything.Echo" + hashSuffix("everything.Echo") + "@2.0.0", Name: "everything_Echo" + hashSuffix("everything.Echo")},
		{MCPName: long, ID: "everything." + long + "@2.0.0", Name: ("everything_" + long)[:55] + hashSuffix("everything_"+long)},
		{MCPName: "trigger.url-elicitation", ID: "everything.trigger_url_elicitation@2.0.0", Name: "everything_trigger_url_elicitation"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got\n%+v\nwant\n%+v", got, want)
	}
	seenID, seenName := map[string]bool{}, map[string]bool{}
	for _, id := range got {
		if _, err := otc.ParseToolID(id.ID); err != nil {
			t.Errorf("id %q: %v", id.ID, err)
		}
		if !otc.ValidToolName(id.Name) {
			t.Errorf("name %q is not a valid OTC name", id.Name)
		}
		if seenID[id.ID] || seenName[id.Name] {
			t.Errorf("not a bijection: %+v", id)
		}
		seenID[id.ID], seenName[id.Name] = true, true
	}
}

func TestToolkitAndVersion(t *testing.T) {
	if got := Toolkit("", "mcp-servers/everything"); got != "mcp_servers_everything" {
		t.Errorf("Toolkit = %q", got)
	}
	if got := Toolkit("My Kit", "x"); got != "My_Kit" {
		t.Errorf("Toolkit = %q", got)
	}
	for _, tt := range []struct{ configured, server, want string }{
		{"", "2.0.0", "2.0.0"}, {"", "2.0", "1.0.0"}, {"", "v1.2.3", "1.0.0"}, {"3.1.4", "2.0.0", "3.1.4"},
	} {
		if got := OTCVersion(tt.configured, tt.server); got != tt.want {
			t.Errorf("OTCVersion(%q, %q) = %q, want %q", tt.configured, tt.server, got, tt.want)
		}
	}
}
