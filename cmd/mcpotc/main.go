package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/rs/zerolog"
)

func main() {
	// Log times to the millisecond (zerolog's default is whole seconds),
	// in JSON and in text, which reads the JSON field back.
	zerolog.TimeFieldFormat = "2006-01-02T15:04:05.000Z07:00"
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := (&Main{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv}).Run(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}
