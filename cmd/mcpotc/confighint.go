package main

import (
	"errors"
	"fmt"
	"strings"
)

// loadMCPFrontConfig is loadConfig for serve-mcp's --config. A file whose
// top level holds mcpServers (or VS Code's servers) is a serve-otc file
// given to the wrong command, the reverse of the mistake serve-otc
// explains: its unknown-key problem says so and what to run instead.
func loadMCPFrontConfig(path string, dst *mcpFrontConfig) error {
	err := loadConfig(path, dst)
	var pe *problemsError
	if !errors.As(err, &pe) {
		return err
	}
	for _, c := range pe.list {
		if (c.key == "mcpServers" || c.key == "servers") && strings.HasPrefix(c.reason, "unknown key") {
			c.reason = fmt.Sprintf("this is a serve-otc configuration (MCP servers to serve to OTC clients): run `mcpotc serve-otc --config %s`. "+
				`serve-mcp's configuration lists OTC servers instead: {"upstreams": [{"url": "http://127.0.0.1:8081"}]}`, path)
		}
	}
	return err
}

// sampleConfigure is what the built-in sample toolkit (serve-mcp without
// an upstream) says of a tool that needs a secret it cannot be given: the
// same toolkit as its own server, named in a config file with the secret.
const sampleConfigure = "the built-in sample toolkit takes no configuration; to try this tool, run `mcpotc sample-otc` and give serve-mcp a config file " +
	`(--config) whose upstream names it and the secret: {"upstreams": [{"url": "http://127.0.0.1:8081", "secrets": {"TWILIO_API_KEY": "VAR"}}]}, ` +
	"with the environment variable VAR set to anything (the sample sends nothing)"
