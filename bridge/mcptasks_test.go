package bridge

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcpotc/mcpotc/bridge/policy"
	"github.com/mcpotc/mcpotc/bridge/webhooks"
)

// taskMeta declares the tasks extension in a 2026-07-28 request's _meta.
const taskMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}`

// A task's end reaches the operator's webhook endpoint (docs/long-running.md,
// Webhooks): a tool whose override says "always" answers a host that
// declares tasks with a task handle; when the OTC call has answered, one
// task.completed message is POSTed, signed with the endpoint's secret,
// naming the task and the tool, and carrying neither the principal nor the
// result.
func TestMCPFrontTaskWebhook(t *testing.T) {
	ctx := context.Background()
	otcServer := &recordingOTC{}
	otcServer.set(toolDef("A.One@1.0.0", "A_One"))
	up := otcUpstreamOn(t, "a", "a_", otcServer)
	up.Tools = policy.Overrides{"A_One": {Task: "always"}}

	type delivery struct {
		header http.Header
		body   []byte
	}
	var mu sync.Mutex
	var got []delivery
	arrived := make(chan struct{}, 4)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, delivery{r.Header.Clone(), b})
		mu.Unlock()
		arrived <- struct{}{}
	}))
	t.Cleanup(receiver.Close)
	key := []byte("a webhook secret of 32 bytes....")
	sender, err := webhooks.New([]webhooks.Endpoint{{URL: receiver.URL, Secrets: [][]byte{key},
		AllowNetworks: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}}, &webhooks.Options{Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sender.Close(context.Background()) })
	f, err := NewMCPFront(ctx, []OTCServer{up}, &MCPFrontOptions{Logger: zerolog.Nop(), Webhooks: sender})
	if err != nil {
		t.Fatal(err)
	}
	res := mcpMessage(t, f, 1, "tools/call", `{"name":"a_A_One","arguments":{},`+taskMeta+`}`)
	r, _ := res["result"].(map[string]any)
	id, _ := r["taskId"].(string)
	if r["resultType"] != "task" || id == "" {
		t.Fatalf("tools/call of a task-always tool: %v, want a task handle", res)
	}
	select {
	case <-arrived:
	case <-time.After(30 * time.Second):
		t.Fatal("no webhook within 30 s of the task's call")
	}
	mu.Lock()
	d := got[0]
	mu.Unlock()
	var msg struct {
		Type string `json:"type"`
		Data struct {
			TaskID, Status, Tool string
			IsError              bool `json:"isError"`
		} `json:"data"`
	}
	if err := json.Unmarshal(d.body, &msg); err != nil || msg.Type != "task.completed" || msg.Data.TaskID != id || msg.Data.Tool != "a_A_One" || msg.Data.IsError {
		t.Errorf("webhook body %s (%v), want task.completed of %s, tool a_A_One", d.body, err, id)
	}
	for _, secret := range []string{"principal", "local", "A.One@1.0.0\",\"success"} {
		if strings.Contains(string(d.body), secret) {
			t.Errorf("webhook body %s carries %q", d.body, secret)
		}
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(d.header.Get("webhook-id") + "." + d.header.Get("webhook-timestamp") + "."))
	mac.Write(d.body)
	if want := "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil)); d.header.Get("webhook-signature") != want {
		t.Errorf("webhook-signature %q, want %q", d.header.Get("webhook-signature"), want)
	}
}
