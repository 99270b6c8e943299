package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	setGCPercent()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := Execute(ctx, NewMain(), os.Args[1:])
	stop()
	os.Exit(code)
}
