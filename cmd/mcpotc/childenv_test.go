package main

import (
	"slices"
	"testing"
)

// TestChildUnsetenv: each server's child loses the bridge's own credential
// variables, every ${VAR} another server's env or headers reference and
// every oauth secret variable;
// what only its own env references is not removed (its env entry gives it).
func TestChildUnsetenv(t *testing.T) {
	cfg := otcFrontConfig{MCPServers: map[string]mcpServerConfig{
		"a":   {Command: "a", Env: map[string]string{"A_TOKEN": "${SECRET_A}", "MIX": "x-${SHARED}-${SECRET_A2}"}},
		"b":   {Command: "b", Env: map[string]string{"B_TOKEN": "${SECRET_B}", "PLAIN": "no refs", "S": "${SHARED}"}},
		"web": {URL: "http://127.0.0.1:1/mcp", Headers: map[string]string{"Authorization": "Bearer ${WEB_TOKEN}"}},
		"oa":  {URL: "http://127.0.0.1:1/mcp", OAuth: &oauthConfig{ClientID: "c", ClientSecretEnv: "OA_SECRET", ClientPrivateKeyEnv: "OA_KEY"}},
	}}
	own := []string{"BRIDGE_KEY", "BRIDGE_JWT"}
	for name, want := range map[string][]string{
		"a":         {"BRIDGE_JWT", "BRIDGE_KEY", "OA_KEY", "OA_SECRET", "SECRET_B", "SHARED", "WEB_TOKEN"},
		"b":         {"BRIDGE_JWT", "BRIDGE_KEY", "OA_KEY", "OA_SECRET", "SECRET_A", "SECRET_A2", "SHARED", "WEB_TOKEN"},
		"-- sample": {"BRIDGE_JWT", "BRIDGE_KEY", "OA_KEY", "OA_SECRET", "SECRET_A", "SECRET_A2", "SECRET_B", "SHARED", "WEB_TOKEN"},
	} {
		if got := childUnsetenv(cfg, name, own); !slices.Equal(got, want) {
			t.Errorf("%s: unset %q, want %q", name, got, want)
		}
	}
	if got := childUnsetenv(otcFrontConfig{}, "x", nil); len(got) != 0 {
		t.Errorf("no config, no own secrets: unset %q, want none", got)
	}
	if own[0] != "BRIDGE_KEY" || len(own) != 2 {
		t.Errorf("childUnsetenv changed its argument: %q", own)
	}
}
