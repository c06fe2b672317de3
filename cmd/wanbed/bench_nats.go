package main

import (
	"context"

	"github.com/spf13/cobra"
)

func newNATSServerCmd() *cobra.Command {
	return &cobra.Command{Use: "nats-server", Hidden: true, RunE: func(*cobra.Command, []string) error { return nil }}
}

func benchNATSTput(ctx context.Context, o benchOptions, dir string, res *benchResults) error {
	res.skipRow(phaseTput, sysNATS, "R3", "loopback", "skipped: not built yet")
	return nil
}
