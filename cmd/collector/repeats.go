package main

import (
	"context"
	"fmt"
	"io"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/internal/collector"
)

// repeatsReport prints the repeat-share report of a running collector
// (the samples of the freshness middleware live in its memory).
func repeatsReport(ctx context.Context, rc remote, format string, stdout, stderr io.Writer) int {
	if rc.addr == "" {
		fmt.Fprintln(stderr, "collector report: --repeats asks a running collector: add --collector HOST:PORT (e.g. 127.0.0.1:7070)")
		return 2
	}
	c, err := api.NewClient(rc.addr, api.WithHTTPClient(rc.http), api.WithToken(rc.token))
	if err != nil {
		fmt.Fprintln(stderr, "collector report:", err)
		return 2
	}
	v, err := c.GetFreshness(ctx)
	if err != nil {
		fmt.Fprintln(stderr, "collector report:", err)
		return 1
	}
	if err := collector.WriteFreshness(stdout, v, format); err != nil {
		fmt.Fprintln(stderr, "collector report:", err)
		return 1
	}
	return 0
}
