package main

import (
	"context"
	"time"

	"github.com/spf13/cobra"

	"github.com/stabilizer/stabilizer/wan"
)

func newEtcdMemberCmd() *cobra.Command {
	return &cobra.Command{Use: "etcd-member", Hidden: true, RunE: func(*cobra.Command, []string) error { return nil }}
}

func benchEtcdWAN(ctx context.Context, o benchOptions, topo *wan.Topology, dir string, res *benchResults) error {
	res.skipRow(phaseWAN, sysEtcd, "linearizable", "", "skipped: not built yet")
	_ = time.Second
	return nil
}

func benchEtcdTput(ctx context.Context, o benchOptions, dir string, res *benchResults) error {
	res.skipRow(phaseTput, sysEtcd, "linearizable", "loopback", "skipped: not built yet")
	return nil
}
