package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/stabilizer/stabilizer/pubsub/pubsubclient"
	"github.com/stabilizer/stabilizer/pubsub/pubsubpb"
)

// The pub/sub commands: topic, pub and sub. They take several addresses in
// --endpoint, comma-separated, and fail over between them.

const endpointsHelp = `--endpoint may list several sites' client addresses, comma-separated: kvctl
uses the first that answers and moves to the next when it is lost.`

// addrs are the addresses in --endpoint.
func (r *remote) addrs() []string {
	var out []string
	for _, a := range strings.Split(r.endpoint, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// pubsub checks the output format against what the command supports,
// then connects to the first site of --endpoint that answers.
func (r *remote) pubsub(formats ...string) (*pubsubclient.Client, error) {
	if err := r.g.checkOutput(formats...); err != nil {
		return nil, err
	}
	return r.dialPubSub()
}

func (r *remote) dialPubSub() (*pubsubclient.Client, error) {
	addrs := r.addrs()
	if len(addrs) == 0 {
		return nil, usageError{errors.New("--endpoint is empty: give a site's client address (several, comma-separated, to fail over)")}
	}
	opts, err := r.dialOptions()
	if err != nil {
		return nil, err
	}
	o := []pubsubclient.Option{pubsubclient.WithTimeout(r.timeout)}
	if len(opts) > 0 {
		o = append(o, pubsubclient.WithDialOptions(opts...))
	}
	c, err := pubsubclient.Dial(addrs, o...)
	if err != nil {
		return nil, r.explainPubSub(err, "")
	}
	return c, nil
}

// ctx bounds a command's one request by --timeout (plus time for the
// site's own DeadlineExceeded to arrive first).
func (r *remote) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), r.timeout+2*time.Second)
}

// explainPubSub turns a pub/sub error into a message that says what to
// do; topic names the topic the command was about.
func (r *remote) explainPubSub(err error, topic string) error {
	var e *pubsubclient.Error
	if !errors.As(err, &e) {
		if errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("no answer from %s within %s (--timeout)", r.endpoint, r.timeout)
		}
		return err
	}
	switch {
	case e.Op == "dial":
		hint := ""
		if r.caFile == "" {
			hint = "; if the sites use TLS, give --cacert"
		}
		return fmt.Errorf("cannot reach a site at %s: is stabilizerd running there? (set --endpoint or STABILIZER_ENDPOINT, several comma-separated to fail over%s); %s",
			r.endpoint, hint, e.Msg)
	case errors.Is(err, pubsubclient.ErrUnknownTopic) && topic != "":
		return fmt.Errorf("topic %q does not exist at %s: create it with kvctl topic create %s", topic, siteOf(e), topic)
	case errors.Is(err, pubsubclient.ErrTopicExists):
		return fmt.Errorf("%s: see it with kvctl topic inspect %s (delete it first to define it anew)", e.Msg, topic)
	case errors.Is(err, pubsubclient.ErrTooLarge):
		return fmt.Errorf("%s: data plus headers must fit the topic's max-message-bytes (see kvctl topic inspect %s)", e.Msg, topic)
	case errors.Is(err, pubsubclient.ErrTimeout):
		return fmt.Errorf("%s (waited up to --timeout %s)", e.Msg, r.timeout)
	case errors.Is(err, pubsubclient.ErrUnavailable):
		return fmt.Errorf("lost the site at %s: %s (--endpoint lists the sites to fail over to)", siteOf(e), e.Msg)
	case errors.Is(err, pubsubclient.ErrTruncated):
		return fmt.Errorf("%s at %s (kvctl sub --on-truncated first starts at the first retained message)", e.Msg, siteOf(e))
	}
	return r.explain(err)
}

func siteOf(e *pubsubclient.Error) string {
	if e.Site == "" {
		return "the site"
	}
	return e.Site
}

// completeTopics completes a TOPIC argument with the topics of the site
// at --endpoint, asked with a short timeout.
func (r *remote) completeTopics(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return r.topicNames(), cobra.ShellCompDirectiveNoFileComp
}

func (r *remote) topicNames() []string {
	saved := r.timeout
	r.timeout = min(r.timeout, 2*time.Second)
	defer func() { r.timeout = saved }()
	c, err := r.dialPubSub()
	if err != nil {
		return nil
	}
	defer c.Close()
	ctx, cancel := r.ctx()
	defer cancel()
	ts, err := c.ListTopics(ctx)
	if err != nil {
		return nil
	}
	var out []string
	for _, t := range ts {
		out = append(out, t.Topic.Name)
	}
	return out
}

func fixedCompletion(values ...string) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return values, cobra.ShellCompDirectiveNoFileComp
	}
}

var predicateNames = []string{"majority", "all", "local", "none", "one_remote"}

func newTopicCmd(g *globals, r *remote) *cobra.Command {
	topic := &cobra.Command{
		Use:   "topic",
		Short: "Define, list, inspect and delete pub/sub topics",
		Long: `A topic is defined once, at any site, and known at every site. Its publish-ack predicate
says when a publish returns (default majority, or audience: persisted at the origin and at
every site with live subscribers); its delivery predicate says when a subscriber's site
may deliver a message (default: once that site persisted it).

` + endpointsHelp,
	}
	var def pubsubclient.Topic
	create := &cobra.Command{
		Use:   "create NAME [--publish-ack P] [--delivery P] [--max-message-bytes N] [--retention limits|interest|workqueue] [--max-messages N] [--max-bytes N] [--max-age D]",
		Short: "Define a topic at every site",
		Long: `Define topic NAME. Creating it again with the same definition succeeds and changes
nothing; with another definition it fails.

Retention says what each site keeps of the topic: --retention limits (the default) drops only
past the limits; interest also drops a message once every durable subscription acked it (at
once when there is none); workqueue once its one durable subscription acked it (a second one is
refused). --max-messages, --max-bytes (at least --max-message-bytes) and --max-age bound what
each site stores under every policy, dropping the topic's oldest messages across origins;
0 is no limit. Sites drop on their own, at slightly different times.`,
		Example: `  kvctl topic create orders
  kvctl topic create jobs --publish-ack all --delivery majority
  kvctl topic create jobs.events --retention interest --max-age 24h
  kvctl topic create jobs.queue --retention workqueue --max-messages 100000
  kvctl topic create metrics --publish-ack audience --max-message-bytes 65536 --max-bytes 67108864 -o json`,
		Args: exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			def.Name = args[0]
			switch def.Retention.Policy {
			case "", pubsubpb.RetentionLimits, pubsubpb.RetentionInterest, pubsubpb.RetentionWorkQueue:
			default:
				return usageError{fmt.Errorf("--retention %q: unknown policy (known: limits, interest, workqueue)", def.Retention.Policy)}
			}
			if def.Retention.MaxAge < 0 || (def.Retention.MaxAge > 0 && def.Retention.MaxAge < time.Millisecond) {
				return usageError{fmt.Errorf("--max-age %s: want 0 (no limit) or at least 1ms", def.Retention.MaxAge)}
			}
			c, err := r.pubsub("text", "json", "table")
			if err != nil {
				return err
			}
			defer c.Close()
			ctx, cancel := r.ctx()
			defer cancel()
			info, err := c.CreateTopic(ctx, def)
			if err != nil {
				return r.explainPubSub(err, def.Name)
			}
			return printTopic(cmd.OutOrStdout(), g.output, info)
		},
	}
	create.Flags().StringVar(&def.PublishAck, "publish-ack", "", "predicate a publish waits for: a name, an inline predicate or audience (default majority)")
	create.Flags().StringVar(&def.Delivery, "delivery", "", "predicate a subscriber's site waits for before delivering (default: persisted there)")
	create.Flags().Uint64Var(&def.MaxMessageBytes, "max-message-bytes", 0, "bound on data plus headers (0: 1 MiB)")
	create.Flags().StringVar(&def.Retention.Policy, "retention", "", "when a message may go besides the limits: limits (never; the default), interest or workqueue")
	create.Flags().Uint64Var(&def.Retention.MaxMessages, "max-messages", 0, "messages each site keeps at most (0: no limit)")
	create.Flags().Uint64Var(&def.Retention.MaxBytes, "max-bytes", 0, "bytes each site keeps at most, at least --max-message-bytes (0: no limit)")
	create.Flags().DurationVar(&def.Retention.MaxAge, "max-age", 0, "age past which each site drops a message, by its HLC (0: no limit)")
	_ = create.RegisterFlagCompletionFunc("publish-ack", fixedCompletion(append(predicateNames, pubsubpb.Audience)...))
	_ = create.RegisterFlagCompletionFunc("delivery", fixedCompletion(predicateNames...))
	_ = create.RegisterFlagCompletionFunc("retention", fixedCompletion(pubsubpb.RetentionLimits, pubsubpb.RetentionInterest, pubsubpb.RetentionWorkQueue))

	list := &cobra.Command{
		Use:     "list",
		Short:   "List the topics a site knows, with their messages and subscriptions",
		Example: `  kvctl topic list --endpoint 127.0.0.1:7003,127.0.0.1:7103 -o json`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := r.pubsub("text", "json", "table")
			if err != nil {
				return err
			}
			defer c.Close()
			ctx, cancel := r.ctx()
			defer cancel()
			ts, err := c.ListTopics(ctx)
			if err != nil {
				return r.explainPubSub(err, "")
			}
			if g.output == "json" {
				return writeJSON(cmd.OutOrStdout(), ts)
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "TOPIC\tPUBLISH-ACK\tDELIVERY\tRETENTION\tORIGINS\tMESSAGES\tBYTES\tSUBSCRIPTIONS")
			for _, t := range ts {
				var n, bytes uint64
				for _, o := range t.Origins {
					n += o.Messages
					bytes += o.Bytes
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\n", t.Topic.Name, orDefault(t.Topic.PublishAck, pubsubpb.DefaultPublishAck),
					orDefault(t.Topic.Delivery, "persisted here"), orDefault(t.Topic.Retention.Policy, pubsubpb.RetentionLimits),
					len(t.Origins), n, bytes, len(t.Subscriptions))
			}
			return w.Flush()
		},
	}
	inspect := &cobra.Command{
		Use:   "inspect NAME",
		Short: "Show a topic: its definition, each origin's messages, its subscriptions and audience",
		Example: `  kvctl topic inspect orders
  kvctl topic inspect orders --endpoint 127.0.0.1:7103 -o json   # as another site sees it`,
		Args:              exactArgs("NAME"),
		ValidArgsFunction: r.completeTopics,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := r.pubsub("text", "json", "table")
			if err != nil {
				return err
			}
			defer c.Close()
			ctx, cancel := r.ctx()
			defer cancel()
			info, err := c.GetTopic(ctx, args[0])
			if err != nil {
				return r.explainPubSub(err, args[0])
			}
			return printTopic(cmd.OutOrStdout(), g.output, info)
		},
	}
	del := &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete a topic's definition at every site",
		Long: `Delete topic NAME everywhere: publishing to it fails from then on. The messages the
sites stored stay.`,
		Example:           `  kvctl topic delete orders`,
		Args:              exactArgs("NAME"),
		ValidArgsFunction: r.completeTopics,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := r.pubsub("text", "json")
			if err != nil {
				return err
			}
			defer c.Close()
			ctx, cancel := r.ctx()
			defer cancel()
			if err := c.DeleteTopic(ctx, args[0]); err != nil {
				if errors.Is(err, pubsubclient.ErrUnknownTopic) {
					return fmt.Errorf("topic %q does not exist at %s (see kvctl topic list)", args[0], c.Site())
				}
				return r.explainPubSub(err, args[0])
			}
			if g.output == "json" {
				return writeJSON(cmd.OutOrStdout(), map[string]string{"deleted": args[0]})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "deleted topic %s\n", args[0])
			return nil
		},
	}
	topic.AddCommand(create, list, inspect, del)
	return topic
}

// retentionText is a topic's retention on one line: the policy, then the
// limits set.
func retentionText(r pubsubclient.Retention) string {
	parts := []string{orDefault(r.Policy, pubsubpb.RetentionLimits)}
	if r.MaxMessages != 0 {
		parts = append(parts, fmt.Sprintf("max %d messages", r.MaxMessages))
	}
	if r.MaxBytes != 0 {
		parts = append(parts, fmt.Sprintf("max %d bytes", r.MaxBytes))
	}
	if r.MaxAge != 0 {
		parts = append(parts, "max age "+r.MaxAge.String())
	}
	return strings.Join(parts, ", ")
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// printTopic shows a topic's definition, its origins and subscriptions.
func printTopic(w io.Writer, format string, t pubsubclient.TopicInfo) error {
	if format == "json" {
		return writeJSON(w, t)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	d := t.Topic
	maxBytes := d.MaxMessageBytes
	if maxBytes == 0 {
		maxBytes = pubsubpb.DefaultMaxMessageBytes
	}
	fmt.Fprintf(tw, "topic %s, created at %s %s\n", d.Name, orDefault(t.CreatedAt, "-"), t.Created)
	fmt.Fprintf(tw, "publish-ack\t%s\n", orDefault(d.PublishAck, pubsubpb.DefaultPublishAck))
	fmt.Fprintf(tw, "delivery\t%s\n", orDefault(d.Delivery, "persisted here"))
	fmt.Fprintf(tw, "max message\t%d bytes\n", maxBytes)
	fmt.Fprintf(tw, "retention\t%s\n", retentionText(d.Retention))
	if len(t.Audience) > 0 || t.AudienceVersion > 0 {
		fmt.Fprintf(tw, "audience\t%s (version %d)\n", orDefault(strings.Join(t.Audience, ", "), "nobody"), t.AudienceVersion)
	}
	if len(t.Origins) > 0 {
		fmt.Fprintln(tw, "\nORIGIN\tMESSAGES\tBYTES\tFIRST SEQ\tLAST SEQ\tDELIVERY FRONTIER\tDROPPED")
		for _, o := range t.Origins {
			first := "-"
			if o.FirstSeq != 0 {
				first = strconv.FormatUint(o.FirstSeq, 10)
			}
			fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%d\t%d\t%d\n", o.Origin, o.Messages, o.Bytes, first, o.LastSeq, o.DeliveryFrontier, o.Dropped)
		}
	}
	if len(t.Subscriptions) > 0 {
		fmt.Fprintln(tw, "\nSUBSCRIPTION\tCONSUMERS\tUNACKED\tDELIVERED\tACKED\tREDELIVERED\tDEAD-LETTERED")
		for _, s := range t.Subscriptions {
			name := s.Name
			if !s.Durable {
				name = "(ephemeral)"
			}
			if s.DeadLetter != "" {
				name += " -> " + s.DeadLetter
			}
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\n", name, s.Consumers, s.Unacked, s.Delivered, s.Acked, s.Redelivered, s.DeadLettered)
		}
	}
	return tw.Flush()
}
