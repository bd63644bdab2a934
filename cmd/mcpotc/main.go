// Command mcpotc bridges MCP and OTC (Open Tool Calling / OXP) in both
// directions. See README.md.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := (&Main{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv}).Run(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}
