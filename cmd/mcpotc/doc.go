// Command mcpotc bridges MCP and OTC (Open Tool Calling / OXP) in both
// directions (README.md). This package owns the command line: flags,
// config files, the logger, signals, and the wiring of the fronts (package
// bridge) to their upstreams; it is the only place that exits or touches
// process-wide state. main only calls Main.Run, which the tests drive.
package main
