// Command mcpotc-bench measures mcpotc's two fronts on loopback, side by
// side in one run: each front against the same upstream called directly, a
// bare loopback HTTP round trip (the floor of one hop), Node peers doing
// the same hop (supergateway, @ivotoby/openapi-mcp-server) when Node is
// available, payloads of 1 KiB to 1 MiB, bursts of 1,000 calls, idle MCP
// sessions and catalogs of 10,000 tools.
//
// It builds cmd/mcpotc (or runs --mcpotc), starts everything it measures
// as processes of its own (peak RSS is each measured process's VmHWM),
// warms up, then makes a fixed number of calls per row and prints a table;
// --json FILE (or --json - for stdout) writes the same figures as JSON.
// It exits 1 when a measured call failed, 2 on a usage error.
//
// CPU time per call is read from /proc, as the sum of the measured
// process's threads' run time (schedstat). The MCP front's target against
// its anchors (an httputil.ReverseProxy hop and a framework-free JSON-RPC
// hop) is measured apart from the rows, in --anchor-rounds interleaved
// rounds whose order turns, so that the machine's drift falls on all
// three alike (anchors.go). The OTC front's anchors (--only otc-anchors, left out of a run without --only,
// otcanchors.go) are measured the same way: serve-otc --mcp against an
// httputil.ReverseProxy carrying the same MCP calls to the same MCP echo
// server over streamable HTTP, and serve-otc -- sample-mcp against a
// framework-free OTC → MCP handler over stdio.
//
//	go run ./cmd/mcpotc-bench                    # the full run (1–2 minutes on 2 cores)
//	go run ./cmd/mcpotc-bench --calls 500 --only hops,baseline
//	go run ./cmd/mcpotc-bench --calls 2500 --only otc-anchors
//	go run ./cmd/mcpotc-bench --json /tmp/bench.json --pprof /tmp/prof
package main
