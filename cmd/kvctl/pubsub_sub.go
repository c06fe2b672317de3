package main

import (
	"encoding/base64"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/stabilizer/stabilizer/pubsub/pubsubclient"
)

const startHelp = "all, new, last, seq:ORIGIN=N,... or time:RFC3339"

func newSubCmd(g *globals, r *remote) *cobra.Command {
	var durable, start, deadLetter, onTruncated string
	var count, maxDeliver, maxAckPending int
	var ack, noAck bool
	var ackWait time.Duration
	cmd := &cobra.Command{
		Use:   "sub TOPIC [--durable NAME] [--start all|new|last|seq:ORIGIN=N,...|time:RFC3339] [--on-truncated error|first] [--count N] [--no-ack]",
		Short: "Print a topic's messages as they arrive, acking each",
		Long: `Subscribe to TOPIC and print its messages as the site delivers them: every origin's
messages in that origin's order, no order across origins. Each message is acked once printed
(--no-ack leaves them unacked: they are delivered again after --ack-wait; once
--max-ack-pending of them, 1000 by default, are unacked, the site delivers no more until some
are). kvctl stops after --count messages, or on Ctrl-C, and then closes the subscription: the
acks are sent and a durable subscription's position is stored.

Without --durable the subscription lasts as long as the command. With --durable NAME it is
stored at the sites: running the command again, at any site, resumes after what was acked
(--start applies only when NAME is new), and several consumers may share it.

--start says where a new subscription begins:
  new                    messages published from now on (the default)
  all                    every retained message
  last                   the last message of each origin, then new ones
  seq:ORIGIN=N,...       from seq N on for each origin named, every message of the others
  time:RFC3339           messages with an HLC at or after that time

--on-truncated says what to do when the site's retention dropped what the subscription reads
next (a durable one resuming behind what is kept, a seq that is gone, a slow reader overtaken by
a limit): error (the default) stops with what was asked and what is kept, first goes on from the
first message kept.

-o text prints each message's data, -o table a line per message with its origin, seq, HLC and
delivery attempt, -o json one JSON object a line.

` + endpointsHelp,
		Example: `  kvctl sub orders
  kvctl sub orders --start all --count 10 -o json
  kvctl sub jobs --durable workers --ack-wait 5m --max-deliver 3 --dead-letter jobs-failed
  kvctl sub events --start seq:us-east-1=120,eu-west-1=87 -o table
  kvctl sub events --start time:2025-06-01T12:00:00Z --no-ack --count 1`,
		Args:              exactArgs("TOPIC"),
		ValidArgsFunction: r.completeTopics,
		RunE: func(cmd *cobra.Command, args []string) error {
			topic := args[0]
			if cmd.Flags().Changed("ack") && cmd.Flags().Changed("no-ack") {
				return usageError{fmt.Errorf("give --ack or --no-ack, not both")}
			}
			startOpt, err := parseStart(start)
			if err != nil {
				return err
			}
			if count < 0 {
				return usageError{fmt.Errorf("--count %d: want 0 (until interrupted) or more", count)}
			}
			opts := []pubsubclient.SubscribeOption{startOpt}
			if durable != "" {
				opts = append(opts, pubsubclient.Durable(durable))
			}
			if ackWait != 0 {
				opts = append(opts, pubsubclient.AckWait(ackWait))
			}
			if maxDeliver != 0 {
				opts = append(opts, pubsubclient.MaxDeliver(maxDeliver))
			}
			if maxAckPending != 0 {
				opts = append(opts, pubsubclient.MaxAckPending(maxAckPending))
			}
			if deadLetter != "" {
				opts = append(opts, pubsubclient.DeadLetter(deadLetter))
			}
			switch onTruncated {
			case "error":
			case "first":
				opts = append(opts, pubsubclient.OnTruncatedFirst())
			default:
				return usageError{fmt.Errorf("--on-truncated %q: want error or first", onTruncated)}
			}
			c, err := r.pubsub("text", "json", "table")
			if err != nil {
				return err
			}
			defer c.Close()
			ctx, stop := signalContext()
			defer stop()
			sctx, cancel := r.ctx()
			sub, err := c.Subscribe(sctx, topic, opts...)
			cancel()
			if err != nil {
				return r.explainPubSub(err, topic)
			}
			out := &msgPrinter{w: cmd.OutOrStdout(), format: g.output}
			warn := func() {
				for _, e := range sub.AckErrors() {
					fmt.Fprintf(cmd.ErrOrStderr(), "kvctl: warning: the site refused the %s of %s/%d: %s\n", e.Kind, e.Origin, e.Seq, e.Msg)
				}
			}
			var runErr error
			for n := 0; count == 0 || n < count; n++ {
				m, err := sub.Next(ctx)
				if err != nil {
					if ctx.Err() == nil {
						runErr = r.explainPubSub(err, topic)
					}
					break
				}
				out.print(m)
				if ack && !noAck {
					if err := m.Ack(); err != nil {
						runErr = r.explainPubSub(err, topic)
						break
					}
				}
				warn()
			}
			cctx, cancel := r.ctx()
			defer cancel()
			if err := sub.Close(cctx); err != nil && runErr == nil {
				runErr = fmt.Errorf("closing the subscription: %w", r.explainPubSub(err, topic))
			}
			warn()
			return runErr
		},
	}
	f := cmd.Flags()
	f.StringVar(&durable, "durable", "", "name of a durable subscription: its position is stored, and a later run resumes it")
	f.StringVar(&start, "start", "new", "where a new subscription begins: "+startHelp)
	f.IntVar(&count, "count", 0, "stop after this many messages (0: until interrupted)")
	f.BoolVar(&ack, "ack", true, "ack each message once printed")
	f.BoolVar(&noAck, "no-ack", false, "leave messages unacked: they are delivered again after --ack-wait")
	f.DurationVar(&ackWait, "ack-wait", 0, "how long a delivery waits for its ack before it is delivered again (0: 30s)")
	f.IntVar(&maxDeliver, "max-deliver", 0, "deliveries of a message before it goes to --dead-letter (0: unlimited)")
	f.IntVar(&maxAckPending, "max-ack-pending", 0, "messages delivered and not acked, over all consumers, before the site delivers no more (0: 1000; at most 1000000)")
	f.StringVar(&deadLetter, "dead-letter", "", "topic that gets the messages past --max-deliver")
	f.StringVar(&onTruncated, "on-truncated", "error", "when retention dropped what the subscription reads next: error, or first (start at the first message kept)")
	_ = cmd.RegisterFlagCompletionFunc("on-truncated", fixedCompletion("error", "first"))
	_ = cmd.RegisterFlagCompletionFunc("start", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return []string{"all", "new", "last", "seq:", "time:"}, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
	})
	_ = cmd.RegisterFlagCompletionFunc("dead-letter", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return r.topicNames(), cobra.ShellCompDirectiveNoFileComp
	})
	return cmd
}

// parseStart reads --start.
func parseStart(s string) (pubsubclient.SubscribeOption, error) {
	bad := func(why string) error {
		return usageError{fmt.Errorf("--start %q: %s", s, why)}
	}
	kind, rest, _ := strings.Cut(s, ":")
	switch {
	case s == "new":
		return pubsubclient.StartNew(), nil
	case s == "all":
		return pubsubclient.StartAll(), nil
	case s == "last":
		return pubsubclient.StartLast(), nil
	case kind == "seq":
		seqs := map[string]uint64{}
		for _, p := range strings.Split(rest, ",") {
			origin, n, ok := strings.Cut(p, "=")
			seq, err := strconv.ParseUint(n, 10, 64)
			if !ok || origin == "" || err != nil || seq == 0 {
				return nil, bad(fmt.Sprintf("%q is not ORIGIN=SEQ with a seq from 1 on, e.g. seq:us-east-1=120,eu-west-1=87", p))
			}
			seqs[origin] = seq
		}
		return pubsubclient.StartSeq(seqs), nil
	case kind == "time":
		t, err := time.Parse(time.RFC3339Nano, rest)
		if err != nil {
			return nil, bad(fmt.Sprintf("%q is not an RFC 3339 time, e.g. time:2025-06-01T12:00:00Z", rest))
		}
		return pubsubclient.StartTime(t), nil
	}
	return nil, bad("want " + startHelp)
}

// msgJSON is a delivered message as scripts read it.
type msgJSON struct {
	Topic      string            `json:"topic"`
	Origin     string            `json:"origin"`
	Seq        uint64            `json:"seq"`
	HLC        pubsubclient.HLC  `json:"hlc"`
	ID         string            `json:"id,omitempty"`
	Headers    map[string]string `json:"headers,omitempty"`
	Data       string            `json:"data"`
	DataBase64 []byte            `json:"data_base64,omitempty"`
	Attempt    int               `json:"attempt"`
}

// msgPrinter prints delivered messages as they come: the data alone
// (text), a line of columns (table) or a JSON line (json).
type msgPrinter struct {
	w       io.Writer
	format  string
	started bool // the table's header is out
}

const msgRow = "%-14s %10s  %-29s %7s  %-16s %s\n"

func (p *msgPrinter) print(m *pubsubclient.Msg) {
	switch p.format {
	case "json":
		out := msgJSON{Topic: m.Topic, Origin: m.Origin, Seq: m.Seq, HLC: m.HLC, ID: m.ID, Headers: m.Headers, Attempt: m.Attempt}
		if utf8.Valid(m.Data) {
			out.Data = string(m.Data)
		} else {
			out.DataBase64 = m.Data
		}
		_ = writeJSON(p.w, out)
	case "table":
		if !p.started {
			fmt.Fprintf(p.w, msgRow, "ORIGIN", "SEQ", "HLC", "ATTEMPT", "ID", "DATA")
			p.started = true
		}
		data := string(m.Data)
		if !utf8.Valid(m.Data) {
			data = "base64:" + base64.StdEncoding.EncodeToString(m.Data)
		}
		for _, k := range slices.Sorted(maps.Keys(m.Headers)) {
			data = k + "=" + m.Headers[k] + " " + data
		}
		fmt.Fprintf(p.w, msgRow, m.Origin, strconv.FormatUint(m.Seq, 10), m.HLC, strconv.Itoa(m.Attempt), orDefault(m.ID, "-"), shorten(data, 80))
	default:
		fmt.Fprintf(p.w, "%s\n", m.Data)
	}
}
