// Package e2e holds mcpotc's end-to-end tests (build tag e2e): the mcpotc
// binary, built from cmd/mcpotc, run as a process against real peers — the
// official MCP SDKs and servers from npm (.ci/install-peers.sh), the MCP
// Inspector, supergateway — and the examples of README.md and docs/*.md run
// as written (readme_test.go). .ci/run sets MCPOTC_E2E=1 and MCPOTC_PEERS
// after installing the peers. With MCPOTC_E2E=1 or CI=true a missing peer
// fails its test; otherwise the test is skipped (env_test.go).
//
// Without the tag, docs_test.go reads the same pages without running
// anything: markers and checks, links between the pages, and the Go
// sources' citations of their headings.
package e2e
