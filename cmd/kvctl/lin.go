package main

import (
	"fmt"

	"time"

	"github.com/spf13/cobra"

	"github.com/stabilizer/stabilizer/kv/kvpb"
)

func newCASCmd(g *globals, r *remote) *cobra.Command {
	var ifVersion uint64
	var ifValue, leaseJob string
	var ifAbsent, del bool
	var leaseToken uint64
	cmd := &cobra.Command{
		Use:   "cas KEY VALUE (--if-version N | --if-value V | --if-absent | --lease JOB --token T)",
		Short: "Compare-and-swap a key of the linearizable namespace (default /lin/)",
		Long: `Write KEY = VALUE only if the condition holds, atomically, in the linearizable namespace.
On a mismatch kvctl exits 1 and says the key's current version and value. With --delete,
VALUE is ignored and the key is removed if the condition holds.`,
		Example: `  kvctl cas /lin/jobs/7/owner us-east-1 --if-absent
  kvctl cas /lin/jobs/7/owner eu-west-1 --if-version 3
  kvctl cas /lin/jobs/7/state running --lease jobs/7 --token 5    # fenced by the job's lease`,
		Args: exactArgs("KEY", "VALUE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			req := &kvpb.CASRequest{Key: args[0], Value: []byte(args[1]), IfAbsent: ifAbsent, IfVersion: ifVersion,
				LeaseJob: leaseJob, LeaseToken: leaseToken, Delete: del, TimeoutMs: r.timeout.Milliseconds()}
			if cmd.Flags().Changed("if-value") {
				req.IfValue, req.HasIfValue = []byte(ifValue), true
			}
			c, ctx, done, err := r.open("text", "json")
			if err != nil {
				return err
			}
			defer done()
			res, err := c.KV.CompareAndSwap(ctx, req)
			if err != nil {
				return r.explain(err)
			}
			if g.output == "json" {
				return writeJSON(cmd.OutOrStdout(), map[string]any{"key": args[0], "version": res.Seq})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "OK %s version %d\n", args[0], res.Seq)
			return nil
		},
	}
	cmd.Flags().Uint64Var(&ifVersion, "if-version", 0, "only if the key is at this version")
	cmd.Flags().StringVar(&ifValue, "if-value", "", "only if the key holds this value")
	cmd.Flags().BoolVar(&ifAbsent, "if-absent", false, "only if the key does not exist")
	cmd.Flags().StringVar(&leaseJob, "lease", "", "only while this job's lease is held with --token")
	cmd.Flags().Uint64Var(&leaseToken, "token", 0, "fencing token of --lease")
	cmd.Flags().BoolVar(&del, "delete", false, "delete the key instead of writing VALUE")
	cmd.MarkFlagsMutuallyExclusive("if-version", "if-value", "if-absent", "lease")
	cmd.MarkFlagsRequiredTogether("lease", "token")
	return cmd
}

func newLeaseCmd(g *globals, r *remote) *cobra.Command {
	lease := &cobra.Command{
		Use:   "lease",
		Short: "Job ownership: leases with TTLs and fencing tokens, held by one holder at a time",
		Long: `A lease names the holder of a job (a region's scheduler, say). Its fencing token increases
every time the lease changes hands; pass it with writes (kvctl cas --lease JOB --token T) so a
deposed holder's writes are refused. A holder renews well before the lease runs out and stops
acting as owner when "valid for" has passed without a renewal.`,
	}
	var holder string
	var ttl time.Duration
	var token uint64
	run := func(op string) func(cmd *cobra.Command, args []string) error {
		return func(cmd *cobra.Command, args []string) error {
			if op != "get" && holder == "" {
				return usageError{fmt.Errorf("--holder is required for %s", op)}
			}
			if (op == "renew" || op == "revoke") && token == 0 {
				return usageError{fmt.Errorf("--token is required for %s (the token grant returned)", op)}
			}
			c, ctx, done, err := r.open("text", "json")
			if err != nil {
				return err
			}
			defer done()
			res, err := c.KV.Lease(ctx, &kvpb.LeaseRequest{Op: op, Job: args[0], Holder: holder, TtlMs: ttl.Milliseconds(),
				Token: token, TimeoutMs: r.timeout.Milliseconds()})
			if err != nil {
				return r.explain(err)
			}
			if g.output == "json" {
				return writeJSON(cmd.OutOrStdout(), map[string]any{"job": res.Job, "holder": res.Holder, "token": res.Token,
					"ttl_ms": res.TtlMs, "valid_for_ms": res.ValidForMs})
			}
			if res.Holder == "" {
				fmt.Fprintf(cmd.OutOrStdout(), "%s: nobody holds it (last token %d)\n", res.Job, res.Token)
				return nil
			}
			msg := fmt.Sprintf("%s: held by %s, token %d, ttl %s", res.Job, res.Holder, res.Token, time.Duration(res.TtlMs)*time.Millisecond)
			if res.ValidForMs > 0 {
				msg += ", valid for " + (time.Duration(res.ValidForMs) * time.Millisecond).String()
			}
			fmt.Fprintln(cmd.OutOrStdout(), msg)
			return nil
		}
	}
	grant := &cobra.Command{Use: "grant JOB --holder H --ttl D", Short: "Take a job's lease if nobody holds it",
		Example: "  kvctl lease grant jobs/7 --holder us-east-1 --ttl 30s", Args: exactArgs("JOB"), RunE: run("grant")}
	renew := &cobra.Command{Use: "renew JOB --holder H --token T", Short: "Renew a lease you hold",
		Example: "  kvctl lease renew jobs/7 --holder us-east-1 --token 5", Args: exactArgs("JOB"), RunE: run("renew")}
	revoke := &cobra.Command{Use: "revoke JOB --holder H --token T", Short: "Give a lease up",
		Args: exactArgs("JOB"), RunE: run("revoke")}
	get := &cobra.Command{Use: "get JOB", Short: "Show who holds a job's lease", Args: exactArgs("JOB"), RunE: run("get")}
	for _, c := range []*cobra.Command{grant, renew, revoke} {
		c.Flags().StringVar(&holder, "holder", "", "who holds (or takes) the lease")
	}
	grant.Flags().DurationVar(&ttl, "ttl", 30*time.Second, "how long the lease lasts after each grant or renewal")
	for _, c := range []*cobra.Command{renew, revoke} {
		c.Flags().Uint64Var(&token, "token", 0, "the fencing token grant returned")
	}
	lease.AddCommand(grant, renew, revoke, get)
	return lease
}
