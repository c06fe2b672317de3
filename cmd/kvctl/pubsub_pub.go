package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/stabilizer/stabilizer/pubsub/pubsubclient"
	"github.com/stabilizer/stabilizer/pubsub/pubsubpb"
)

// maxLine bounds a line of stdin that pub publishes: what the client sends
// in one message at most.
const maxLine = 64 << 20

func newPubCmd(g *globals, r *remote) *cobra.Command {
	var headers []string
	var id, idPrefix, idField string
	var async, keepGoing bool
	cmd := &cobra.Command{
		Use:   "pub TOPIC [MESSAGE...]",
		Short: "Publish messages to a topic, each answered once the topic's publish-ack predicate holds",
		Long: `Publish each MESSAGE argument as one message of TOPIC; with none, or "-", publish each line
of stdin (empty lines are skipped). A publish returns once the topic's publish-ack predicate
holds; kvctl prints where each message is: its origin site and its seq on that site's pubsub
stream.

--id gives the message an id: publishing it again, at any site, publishes nothing and prints
the original, marked duplicate. With several messages, --id-prefix gives message N the id
PREFIX followed by N (the argument's position, or stdin's line number), so that a run that was
interrupted can be run again safely. A publish without an id that loses its site is not
retried elsewhere: it may have been published.

--id-field NAME takes each message's id from its own JSON: the string field NAME at the top
of the message (a line of stdin that is not a JSON object with that field is an error).

--keep-going publishes every message even when some fail: each failure is reported (-o json:
a line with "error"), and the exit status is 1 if any failed. Without it, pub stops at the
first failure.

--async pipelines the publishes on one stream instead of waiting for each; the output keeps
the messages' order.

` + endpointsHelp,
		Example: `  kvctl pub orders '{"order":7}'
  kvctl pub orders a b c --header source=cli -o json
  kvctl pub jobs --id-prefix batch-42- < jobs.txt     # safe to run again
  kvctl pub events --id-field event_id --keep-going -o json < events.jsonl
  tail -f app.log | kvctl pub logs --async`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageError{fmt.Errorf("%s takes TOPIC, then the messages (none, or -, for stdin's lines); see %s --help",
					cmd.CommandPath(), cmd.CommandPath())}
			}
			return nil
		},
		ValidArgsFunction: r.completeTopics,
		RunE: func(cmd *cobra.Command, args []string) error {
			topic, msgs := args[0], args[1:]
			if n := btoi(id != "") + btoi(idPrefix != "") + btoi(idField != ""); n > 1 {
				return usageError{fmt.Errorf("give one of --id, --id-prefix and --id-field")}
			}
			if keepGoing && async {
				return usageError{fmt.Errorf("--keep-going publishes one message after the other: drop --async")}
			}
			hdrs, err := parseHeaders(headers)
			if err != nil {
				return err
			}
			stdin := len(msgs) == 0 || (len(msgs) == 1 && msgs[0] == "-")
			if id != "" && (stdin || len(msgs) > 1) {
				return usageError{fmt.Errorf("--id names one message; to name each of several, give --id-prefix (ids PREFIX1, PREFIX2, ...)")}
			}
			if err := g.checkOutput("text", "json", "table"); err != nil {
				return err
			}
			next, unit := argMessages(msgs), "message"
			if stdin {
				next, unit = lineMessages(cmd.InOrStdin()), "line"
			}
			c, err := r.pubsub("text", "json", "table")
			if err != nil {
				return err
			}
			defer c.Close()
			p := &pubRun{r: r, c: c, topic: topic, headers: hdrs, id: id, idPrefix: idPrefix, idField: idField, keepGoing: keepGoing, unit: unit,
				out: newPubPrinter(cmd.OutOrStdout(), cmd.ErrOrStderr(), g.output, topic), several: stdin || len(msgs) > 1}
			if async {
				err = p.async(next)
			} else {
				err = p.sync(next)
			}
			if ferr := p.out.flush(); err == nil {
				err = ferr
			}
			return err
		},
	}
	cmd.Flags().StringArrayVar(&headers, "header", nil, "header KEY=VALUE for every message (repeatable)")
	cmd.Flags().StringVar(&id, "id", "", "message id of the one message: publishing it again publishes nothing")
	cmd.Flags().StringVar(&idPrefix, "id-prefix", "", "message N gets id PREFIX followed by N (stdin: the line number)")
	cmd.Flags().StringVar(&idField, "id-field", "", "take each message's id from this top-level string field of its JSON")
	cmd.Flags().BoolVar(&keepGoing, "keep-going", false, "publish every message even when some fail; exit 1 if any did")
	cmd.Flags().BoolVar(&async, "async", false, "pipeline the publishes instead of waiting for each")
	return cmd
}

// parseHeaders reads --header KEY=VALUE flags.
func parseHeaders(flags []string) (map[string]string, error) {
	if len(flags) == 0 {
		return nil, nil
	}
	out := map[string]string{}
	for _, f := range flags {
		k, v, ok := strings.Cut(f, "=")
		if !ok || k == "" {
			return nil, usageError{fmt.Errorf("--header %q: want KEY=VALUE, e.g. --header source=cli", f)}
		}
		out[k] = v
	}
	return out, nil
}

// A message source returns the next message and its number, ok false at
// the end.
type messages func() (n int, data []byte, ok bool, err error)

func argMessages(args []string) messages {
	i := 0
	return func() (int, []byte, bool, error) {
		if i == len(args) {
			return 0, nil, false, nil
		}
		i++
		return i, []byte(args[i-1]), true, nil
	}
}

// lineMessages returns stdin's lines, numbered from 1, without their end
// of line, skipping empty ones.
func lineMessages(in io.Reader) messages {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	n := 0
	return func() (int, []byte, bool, error) {
		for sc.Scan() {
			n++
			line := strings.TrimSuffix(sc.Text(), "\r")
			if line != "" {
				return n, []byte(line), true, nil
			}
		}
		if err := sc.Err(); err != nil {
			if err == bufio.ErrTooLong {
				return 0, nil, false, fmt.Errorf("stdin line %d: longer than %d MiB", n+1, maxLine>>20)
			}
			return 0, nil, false, fmt.Errorf("stdin: %w", err)
		}
		return 0, nil, false, nil
	}
}

// pubRun publishes one pub command's messages.
type pubRun struct {
	r            *remote
	c            *pubsubclient.Client
	topic        string
	headers      map[string]string
	id, idPrefix string
	idField      string // take each message's id from this JSON field
	keepGoing    bool
	unit         string // message or line
	several      bool
	out          *pubPrinter
}

func (p *pubRun) options(n int, data []byte) (string, []pubsubclient.PublishOption, error) {
	var opts []pubsubclient.PublishOption
	if p.headers != nil {
		opts = append(opts, pubsubclient.Headers(p.headers))
	}
	id := p.id
	if p.idPrefix != "" {
		id = fmt.Sprintf("%s%d", p.idPrefix, n)
	}
	if p.idField != "" {
		var fields map[string]any
		if err := json.Unmarshal(data, &fields); err != nil {
			return "", nil, fmt.Errorf("%s %d: --id-field %s: not a JSON object: %v", p.unit, n, p.idField, err)
		}
		s, ok := fields[p.idField].(string)
		if !ok || s == "" {
			return "", nil, fmt.Errorf("%s %d: --id-field %s: no such string field in the message", p.unit, n, p.idField)
		}
		id = s
	}
	if id != "" {
		opts = append(opts, pubsubclient.MsgID(id))
	}
	return id, opts, nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// fail names the message an error is about, when there are several.
func (p *pubRun) fail(n int, err error) error {
	err = p.r.explainPubSub(err, p.topic)
	if p.several {
		return fmt.Errorf("%s %d: %w", p.unit, n, err)
	}
	return err
}

func (p *pubRun) sync(next messages) error {
	failed, total := 0, 0
	for {
		n, data, ok, err := next()
		if err != nil {
			return err
		}
		if !ok {
			break
		}
		total++
		id, opts, err := p.options(n, data)
		if err == nil {
			// The client's --timeout goes with the request: the site says
			// how far the acks got before the client gives up.
			var a pubsubclient.PubAck
			if a, err = p.c.Publish(context.Background(), p.topic, data, opts...); err == nil {
				p.out.print(n, id, a)
				continue
			}
			err = p.fail(n, err)
		}
		p.out.printFailure(n, id, err)
		if !p.keepGoing {
			return err
		}
		failed++
		p.out.warn(err)
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d %ss failed (each reported above); the others were published", failed, total, p.unit)
	}
	return nil
}

// async publishes without waiting and prints the answers in order as they
// come; after a failure it publishes no more.
func (p *pubRun) async(next messages) error {
	type pending struct {
		n  int
		id string
		f  *pubsubclient.Future
	}
	var queue []pending
	// drain prints the answered publishes at the head of the queue,
	// waiting for them when wait is set.
	drain := func(wait bool) error {
		for len(queue) > 0 {
			h := queue[0]
			if !wait {
				select {
				case <-h.f.Done():
				default:
					return nil
				}
			}
			a, err := h.f.Result()
			queue = queue[1:]
			if err != nil {
				err = p.fail(h.n, err)
				if len(queue) > 0 {
					err = fmt.Errorf("%w (%d later messages were sent and may be published)", err, len(queue))
				}
				return err
			}
			p.out.print(h.n, h.id, a)
		}
		return nil
	}
	for {
		n, data, ok, err := next()
		if err != nil {
			if derr := drain(true); derr != nil {
				return derr
			}
			return err
		}
		if !ok {
			return drain(true)
		}
		id, opts, err := p.options(n, data)
		if err != nil {
			if derr := drain(true); derr != nil {
				return derr
			}
			return err
		}
		// The window's wait ends when publishes are answered, which
		// --timeout bounds.
		f, err := p.c.PublishAsync(context.Background(), p.topic, data, opts...)
		if err != nil {
			if derr := drain(true); derr != nil {
				return derr
			}
			return p.fail(n, err)
		}
		queue = append(queue, pending{n, id, f})
		if err := drain(false); err != nil {
			return err
		}
	}
}

// pubJSON is a publish's answer as scripts read it, one JSON object a line.
type pubJSON struct {
	Topic     string                `json:"topic"`
	N         int                   `json:"n"`
	ID        string                `json:"id,omitempty"`
	Origin    string                `json:"origin"`
	Seq       uint64                `json:"seq"`
	HLC       pubsubclient.HLC      `json:"hlc"`
	Frontier  pubsubclient.Frontier `json:"frontier"`
	Duplicate bool                  `json:"duplicate,omitempty"`
}

// pubFailJSON is a failed publish as scripts read it (-o json).
type pubFailJSON struct {
	Topic string `json:"topic"`
	N     int    `json:"n"`
	ID    string `json:"id,omitempty"`
	Error string `json:"error"`
}

// printFailure reports a failed publish in the JSON output, so that a
// script reading the lines sees every message's outcome; text and table
// output say failures on stderr (the command's error, or warn).
func (p *pubPrinter) printFailure(n int, id string, err error) {
	if p.format == "json" {
		_ = writeJSON(p.w, pubFailJSON{Topic: p.topic, N: n, ID: id, Error: err.Error()})
	}
}

// warn says a failure that does not end the command, on stderr.
func (p *pubPrinter) warn(err error) {
	fmt.Fprintf(p.errw, "kvctl: %v\n", err)
}

// pubPrinter prints each publish's answer: a line (text), a JSON line
// (json) or a row of a table printed at the end (table).
type pubPrinter struct {
	w      io.Writer
	errw   io.Writer // for failures that do not end the command
	format string
	topic  string
	tw     *tabwriter.Writer // from the first row on
}

func newPubPrinter(w, errw io.Writer, format, topic string) *pubPrinter {
	return &pubPrinter{w: w, errw: errw, format: format, topic: topic}
}

func (p *pubPrinter) print(n int, id string, a pubsubclient.PubAck) {
	switch p.format {
	case "json":
		_ = writeJSON(p.w, pubJSON{Topic: p.topic, N: n, ID: id, Origin: a.Origin, Seq: a.Seq, HLC: a.HLC, Frontier: a.Frontier, Duplicate: a.Duplicate})
	case "table":
		if p.tw == nil {
			p.tw = tabwriter.NewWriter(p.w, 0, 4, 2, ' ', 0)
			fmt.Fprintln(p.tw, "N\tORIGIN\tSEQ\tHLC\tID\tDUPLICATE")
		}
		dup := ""
		if a.Duplicate {
			dup = "yes"
		}
		fmt.Fprintf(p.tw, "%d\t%s\t%d\t%s\t%s\t%s\n", n, a.Origin, a.Seq, a.HLC, orDefault(id, "-"), dup)
	default:
		suffix := ""
		if a.Duplicate {
			suffix = " (duplicate: published before, nothing published now)"
		}
		fmt.Fprintf(p.w, "OK %s/%s seq %d%s\n", a.Origin, pubsubpb.Stream, a.Seq, suffix)
	}
}

func (p *pubPrinter) flush() error {
	if p.tw != nil {
		return p.tw.Flush()
	}
	return nil
}
