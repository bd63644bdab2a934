// Command authclient is the client the MCP conformance runner's auth
// scenarios drive (`conformance client --command "authclient"`): it starts
// `mcpotc serve-otc` against the scenario's MCP server (the last argument)
// with an "oauth" entry, authorizes the bridge the way its operator would
// (the URL from serve-otc's log, where the operator finds it, opened in a
// browser with cookies that follows the redirects; the scenario's
// authorization server approves at once), waits for check_url to say
// completed, then lists the tools over OTC and calls one (the
// calls the scenario expects, when it expects some: see scenarioCalls). A call told to
// wait for the operator (step-up) is authorized from the log again and
// retried, a bounded number of times.
//
// Environment: MCPOTC_BIN, the mcpotc binary; MCP_CONFORMANCE_SCENARIO and
// MCP_CONFORMANCE_CONTEXT, set by the runner (client_id, client_secret,
// private_key_pem for the scenarios that pre-register a client).
//
// It is a test helper: only the e2e tests build it.
package main
