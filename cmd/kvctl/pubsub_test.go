package main

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stabilizer/stabilizer/pubsub/pubsubclient/pubsubclienttest"
	"github.com/stabilizer/stabilizer/pubsub/pubsubpb"
)

// pubsubCase is one kvctl run against fake sites: its arguments, its
// stdin, and what it must print.
type pubsubCase struct {
	args   []string
	stdin  string
	code   int
	stdout string // a regexp the whole of stdout matches ("": nothing)
	stderr string // a substring of stderr
}

func (tc pubsubCase) run(t *testing.T, endpoint string) {
	t.Helper()
	if tc.stdin != "" {
		defer withStdin(t, tc.stdin)()
	}
	var out, errOut bytes.Buffer
	code := run(append(tc.args, "--endpoint", endpoint), &out, &errOut)
	if code != tc.code {
		t.Fatalf("kvctl %s: exit %d, want %d; stdout %q, stderr %q", strings.Join(tc.args, " "), code, tc.code, out.String(), errOut.String())
	}
	if tc.code == 0 {
		if !regexp.MustCompile(`^(?s:` + tc.stdout + `)$`).MatchString(out.String()) {
			t.Fatalf("kvctl %s: stdout\n%s\nwant it to match\n%s", strings.Join(tc.args, " "), out.String(), tc.stdout)
		}
		if !strings.Contains(errOut.String(), tc.stderr) {
			t.Fatalf("kvctl %s: stderr %q, want %q in it", strings.Join(tc.args, " "), errOut.String(), tc.stderr)
		}
		return
	}
	if !regexp.MustCompile(`^(?s:`+tc.stdout+`)$`).MatchString(out.String()) || !strings.Contains(errOut.String(), tc.stderr) {
		t.Fatalf("kvctl %s: stdout %q, stderr %q; want stdout to match %q and %q on stderr", strings.Join(tc.args, " "), out.String(), errOut.String(), tc.stdout, tc.stderr)
	}
	if strings.Count(strings.TrimSpace(errOut.String()), "\n") != 0 {
		t.Fatalf("kvctl %s: error is not one line: %q", strings.Join(tc.args, " "), errOut.String())
	}
}

// withStdin makes stdin read the given text until the returned func
// restores it.
func withStdin(t *testing.T, text string) (restore func()) {
	t.Helper()
	f := filepath.Join(t.TempDir(), "stdin")
	if err := os.WriteFile(f, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	in, err := os.Open(f)
	if err != nil {
		t.Fatal(err)
	}
	saved := os.Stdin
	os.Stdin = in
	return func() { os.Stdin = saved; in.Close() }
}

func runAll(t *testing.T, endpoint string, cases []pubsubCase) {
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) { tc.run(t, endpoint) })
	}
}

// deadAddr is an address nothing listens on.
func deadAddr(t *testing.T) string {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	_ = lis.Close()
	return addr
}

const hlc = `\d{4}-\d\d-\d\dT[\d:.]+Z\+\d+`

func TestTopicCommands(t *testing.T) {
	cl := pubsubclienttest.NewCluster()
	site := cl.Start(t, "us-east-1")
	runAll(t, site.Addr, []pubsubCase{
		{args: []string{"topic", "create", "orders"}, stdout: `topic orders, created at us-east-1 ` + hlc + `
publish-ack  majority
delivery     persisted here
max message  1048576 bytes
retention    limits
`},
		{args: []string{"topic", "create", "orders"}, stdout: `topic orders, .*`},
		{args: []string{"topic", "create", "orders", "--publish-ack", "all"}, code: 1,
			stderr: "kvctl: topic orders exists with another definition (publish_ack majority, delivery \"\"): see it with kvctl topic inspect orders"},
		{args: []string{"topic", "create", "jobs", "--publish-ack", "audience", "--delivery", "majority", "--max-message-bytes", "64", "-o", "json"},
			stdout: `\{"topic":\{"name":"jobs","publish_ack":"audience","delivery":"majority","max_message_bytes":64,"retention":\{"policy":"limits"\}\},"created_at":"us-east-1",.*\}
`},
		{args: []string{"topic", "create", "jobs.queue", "--retention", "workqueue", "--max-messages", "1000", "--max-bytes", "67108864", "--max-age", "24h"},
			stdout: `topic jobs.queue, .*
retention    workqueue, max 1000 messages, max 67108864 bytes, max age 24h0m0s
`},
		{args: []string{"topic", "create", "x", "--retention", "forever"}, code: 2, stderr: `--retention "forever": unknown policy (known: limits, interest, workqueue)`},
		{args: []string{"topic", "create", "x", "--max-age", "1us"}, code: 2, stderr: `--max-age 1µs: want 0 (no limit) or at least 1ms`},
		{args: []string{"topic", "create"}, code: 2, stderr: "takes 1 argument(s) (NAME), got 0"},
		{args: []string{"topic", "list"}, stdout: `TOPIC       PUBLISH-ACK  DELIVERY        RETENTION  ORIGINS  MESSAGES  BYTES  SUBSCRIPTIONS
jobs        audience     majority        limits     0        0         0      0
jobs.queue  majority     persisted here  workqueue  0        0         0      0
orders      majority     persisted here  limits     0        0         0      0
`},
		{args: []string{"topic", "list", "-o", "json"}, stdout: `\[\{"topic":\{"name":"jobs".*\},\{"topic":\{"name":"orders".*\}\]
`},
		{args: []string{"topic", "list", "-o", "yaml"}, code: 2, stderr: "unknown output format"},
		{args: []string{"pub", "orders", "m"}, stdout: "OK us-east-1/pubsub seq 1\n"},
		{args: []string{"topic", "inspect", "orders", "-o", "table"}, stdout: `topic orders, .*
ORIGIN     MESSAGES  BYTES  FIRST SEQ  LAST SEQ  DELIVERY FRONTIER  DROPPED
us-east-1  1         1      1          1         2                  0
`},
		{args: []string{"topic", "inspect", "nope"}, code: 1,
			stderr: `kvctl: topic "nope" does not exist at ` + site.Addr + `: create it with kvctl topic create nope`},
		{args: []string{"topic", "delete", "jobs"}, stdout: "deleted topic jobs\n"},
		{args: []string{"topic", "delete", "jobs", "-o", "json"}, code: 1, stderr: `topic "jobs" does not exist at`},
	})
}

func TestPubCommands(t *testing.T) {
	cl := pubsubclienttest.NewCluster()
	site := cl.Start(t, "us-east-1")
	(pubsubCase{args: []string{"topic", "create", "orders"}, stdout: ".*"}).run(t, site.Addr)
	(pubsubCase{args: []string{"topic", "create", "small", "--max-message-bytes", "3"}, stdout: ".*"}).run(t, site.Addr)
	runAll(t, site.Addr, []pubsubCase{
		{args: []string{"pub", "orders", "a", "b", "--header", "k=v", "--header", "j=w=x", "-o", "json"},
			stdout: `\{"topic":"orders","n":1,"origin":"us-east-1","seq":1,"hlc":\{"wall":\d+,"logical":0\},"frontier":\{"predicate":"majority","seq":1,"version":1\}\}
\{"topic":"orders","n":2,"origin":"us-east-1","seq":2,.*\}
`},
		{args: []string{"pub", "orders", "--id-prefix", "p-", "-o", "json"}, stdin: "x\n\ny\r\n",
			stdout: `\{"topic":"orders","n":1,"id":"p-1","origin":"us-east-1","seq":3,.*\}
\{"topic":"orders","n":3,"id":"p-3","origin":"us-east-1","seq":4,.*\}
`},
		// Again: nothing is published twice.
		{args: []string{"pub", "orders", "-", "--id-prefix", "p-"}, stdin: "x\n\ny\r\n",
			stdout: `OK us-east-1/pubsub seq 3 \(duplicate: published before, nothing published now\)
OK us-east-1/pubsub seq 4 \(duplicate: .*\)
`},
		{args: []string{"pub", "orders", "--async"}, stdin: "1\n2\n3\n4\n5\n",
			stdout: "OK us-east-1/pubsub seq 5\nOK us-east-1/pubsub seq 6\nOK us-east-1/pubsub seq 7\nOK us-east-1/pubsub seq 8\nOK us-east-1/pubsub seq 9\n"},
		{args: []string{"pub", "orders", "z", "--id", "z-1", "-o", "table"}, stdout: `N  ORIGIN     SEQ  HLC\s+ID   DUPLICATE
1  us-east-1  10   ` + hlc + `\s+z-1\s*
`},
		{args: []string{"pub", "orders", "a", "b", "--id", "x"}, code: 2, stderr: "--id names one message; to name each of several, give --id-prefix"},
		{args: []string{"pub", "orders", "a", "--id", "x", "--id-prefix", "y"}, code: 2, stderr: "give one of --id, --id-prefix and --id-field"},
		{args: []string{"pub", "orders", "--keep-going", "--async"}, stdin: "a\n", code: 2, stderr: "--keep-going publishes one message after the other: drop --async"},
		{args: []string{"pub", "orders", "a", "--header", "novalue"}, code: 2, stderr: `--header "novalue": want KEY=VALUE`},
		{args: []string{"pub", "orders", "a", "--header", "=v"}, code: 2, stderr: `--header "=v": want KEY=VALUE`},
		{args: []string{"pub"}, code: 2, stderr: "kvctl pub takes TOPIC, then the messages"},
		{args: []string{"pub", "nope", "a"}, code: 1, stderr: `topic "nope" does not exist at ` + site.Addr + `: create it with kvctl topic create nope`},
		{args: []string{"pub", "nope", "a", "b"}, code: 1, stderr: `kvctl: message 1: topic "nope" does not exist`},
		// What was published before the error is printed.
		{args: []string{"pub", "small", "--async"}, stdin: "ok\ntoo long\n", code: 1, stdout: "OK us-east-1/pubsub seq 11\n",
			stderr: "kvctl: line 2: message of 8 bytes is larger than topic small's max_message_bytes 3: data plus headers must fit the topic's max-message-bytes (see kvctl topic inspect small)"},
	})
	reqs := site.PublishRequests()
	if r := reqs[0]; r.Headers["k"] != "v" || r.Headers["j"] != "w=x" || string(r.Data) != "a" {
		t.Errorf("first publish %v", r)
	}
	if r := reqs[3]; string(r.Data) != "y" || r.MsgId != "p-3" {
		t.Errorf("stdin's second line: %v", r)
	}
}

// TestPubKeepGoingAndIDField: --keep-going publishes every line and
// reports each outcome (a JSON line with "error" for a failure), exit 1 if
// any failed; --id-field takes each message's id from its JSON.
func TestPubKeepGoingAndIDField(t *testing.T) {
	cl := pubsubclienttest.NewCluster()
	site := cl.Start(t, "us-east-1")
	(pubsubCase{args: []string{"topic", "create", "small", "--max-message-bytes", "3"}, stdout: ".*"}).run(t, site.Addr)
	(pubsubCase{args: []string{"topic", "create", "events"}, stdout: ".*"}).run(t, site.Addr)
	pub := func(stdin string, args ...string) (int, string, string) {
		t.Helper()
		defer withStdin(t, stdin)()
		var out, errOut bytes.Buffer
		code := run(append(append([]string{"pub"}, args...), "--endpoint", site.Addr), &out, &errOut)
		return code, out.String(), errOut.String()
	}
	code, out, errOut := pub("ok\ntoo long\nok2\n", "small", "--keep-going", "-o", "json")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 1 || len(lines) != 3 || !strings.Contains(lines[0], `"n":1,"origin"`) ||
		!strings.Contains(lines[1], `"n":2,"error":"line 2: message of 8 bytes is larger`) || !strings.Contains(lines[2], `"n":3,"origin"`) ||
		!strings.Contains(errOut, "1 of 3 lines failed") {
		t.Fatalf("--keep-going: exit %d\nstdout %s\nstderr %s", code, out, errOut)
	}
	code, out, errOut = pub(`{"event_id":"e-1","v":1}`+"\n"+`{"v":2}`+"\n", "events", "--id-field", "event_id", "-o", "json")
	if code != 1 || !strings.Contains(out, `"n":1,"id":"e-1"`) || !strings.Contains(errOut, "line 2: --id-field event_id: no such string field") {
		t.Fatalf("--id-field: exit %d\nstdout %s\nstderr %s", code, out, errOut)
	}
	if reqs := site.PublishRequests(); reqs[len(reqs)-1].MsgId != "e-1" {
		t.Errorf("the id sent: %+v", reqs[len(reqs)-1])
	}
}

func TestSubCommands(t *testing.T) {
	cl := pubsubclienttest.NewCluster()
	site := cl.Start(t, "us-east-1")
	(pubsubCase{args: []string{"topic", "create", "orders"}, stdout: ".*"}).run(t, site.Addr)
	(pubsubCase{args: []string{"pub", "orders", "a", "b", "c", "--header", "k=v"}, stdout: ".*"}).run(t, site.Addr)
	runAll(t, site.Addr, []pubsubCase{
		{args: []string{"sub", "orders", "--start", "all", "--count", "2"}, stdout: "a\nb\n"},
		{args: []string{"sub", "orders", "--start", "all", "--count", "1", "-o", "json"},
			stdout: `\{"topic":"orders","origin":"us-east-1","seq":1,"hlc":\{"wall":\d+,"logical":0\},"headers":\{"k":"v"\},"data":"a","attempt":1\}
`},
		{args: []string{"sub", "orders", "--start", "seq:us-east-1=3", "--count", "1", "-o", "table"},
			stdout: `ORIGIN                SEQ  HLC                           ATTEMPT  ID               DATA
us-east-1               3  ` + hlc + `\s+1  -                k=v c
`},
		{args: []string{"sub", "orders", "--start", "last", "--count", "1"}, stdout: "c\n"},
		{args: []string{"sub", "orders", "--start", "time:2000-01-01T00:00:00Z", "--count", "1"}, stdout: "a\n"},
		// A durable subscription resumes after what was acked.
		{args: []string{"sub", "orders", "--durable", "d", "--start", "all", "--count", "1"}, stdout: "a\n"},
		{args: []string{"sub", "orders", "--durable", "d", "--count", "1"}, stdout: "b\n"},
		// Unacked: delivered again.
		{args: []string{"sub", "orders", "--durable", "d", "--count", "1", "--no-ack"}, stdout: "c\n"},
		{args: []string{"sub", "orders", "--durable", "d", "--count", "1"}, stdout: "c\n"},
		{args: []string{"sub", "orders", "--start", "bogus"}, code: 2,
			stderr: `kvctl: --start "bogus": want all, new, last, seq:ORIGIN=N,... or time:RFC3339`},
		{args: []string{"sub", "orders", "--start", "seq:us-east-1"}, code: 2, stderr: `--start "seq:us-east-1": "us-east-1" is not ORIGIN=SEQ`},
		{args: []string{"sub", "orders", "--start", "seq:us-east-1=0"}, code: 2, stderr: `"us-east-1=0" is not ORIGIN=SEQ with a seq from 1 on`},
		{args: []string{"sub", "orders", "--start", "time:yesterday"}, code: 2, stderr: `--start "time:yesterday": "yesterday" is not an RFC 3339 time`},
		{args: []string{"sub", "orders", "--ack", "--no-ack"}, code: 2, stderr: "give --ack or --no-ack, not both"},
		{args: []string{"sub", "orders", "--count", "-1"}, code: 2, stderr: "--count -1"},
		{args: []string{"sub", "orders", "--dead-letter", "orders"}, code: 1, stderr: "a topic cannot be its own dead-letter topic"},
		{args: []string{"sub", "nope", "--count", "1"}, code: 1, stderr: `topic "nope" does not exist at ` + site.Addr + `: create it with kvctl topic create nope`},
		{args: []string{"sub", "orders", "-o", "yaml"}, code: 2, stderr: "unknown output format"},
		{args: []string{"sub", "orders", "--on-truncated", "never"}, code: 2, stderr: `--on-truncated "never": want error or first`},
		{args: []string{"sub", "orders", "--start", "all", "--on-truncated", "first", "--count", "1"}, stdout: "a\n"},
	})
	if starts := site.Starts(); starts[len(starts)-1].OnTruncated != pubsubpb.SubscribeStart_TRUNCATED_FIRST {
		t.Errorf("--on-truncated first sent %v", starts[len(starts)-1])
	}
	acks := 0
	for _, a := range site.Acks() {
		if a.Kind == 0 {
			acks++
		}
	}
	// One per message printed, but for the --no-ack run's; a Close per
	// run that subscribed.
	if acks != 10 || site.Closes() != 10 {
		t.Errorf("the site got %d acks and %d closes, want 10 and 10", acks, site.Closes())
	}
	if got := cl.Position("orders", "d"); got != "us-east-1:0+1,2,3" {
		t.Errorf("durable position %s", got)
	}
}

// TestPubSubEndpoints: several addresses fail over; none reachable says
// what to do.
func TestPubSubEndpoints(t *testing.T) {
	cl := pubsubclienttest.NewCluster()
	site := cl.Start(t, "eu-west-1")
	dead := deadAddr(t)
	(pubsubCase{args: []string{"topic", "create", "orders"}, stdout: "topic orders, created at eu-west-1 .*"}).run(t, dead+","+site.Addr)
	(pubsubCase{args: []string{"pub", "orders", "x"}, stdout: "OK eu-west-1/pubsub seq 1\n"}).run(t, " "+dead+" , "+site.Addr)
	(pubsubCase{args: []string{"topic", "list"}, code: 1,
		stderr: fmt.Sprintf("kvctl: cannot reach a site at %s: is stabilizerd running there?", dead)}).run(t, dead)
	(pubsubCase{args: []string{"topic", "list"}, code: 2, stderr: "--endpoint is empty"}).run(t, " , ")
}

// TestTopicCompletion: TOPIC arguments complete with the site's topics.
func TestTopicCompletion(t *testing.T) {
	cl := pubsubclienttest.NewCluster()
	site := cl.Start(t, "us-east-1")
	(pubsubCase{args: []string{"topic", "create", "orders"}, stdout: ".*"}).run(t, site.Addr)
	(pubsubCase{args: []string{"topic", "create", "jobs"}, stdout: ".*"}).run(t, site.Addr)
	for _, args := range [][]string{{"topic", "inspect", ""}, {"pub", ""}, {"sub", ""}, {"sub", "orders", "--dead-letter", ""}} {
		var out, errOut bytes.Buffer
		if code := run(append([]string{"__complete", "--endpoint", site.Addr}, args...), &out, &errOut); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errOut.String())
		}
		if out.String() != "jobs\norders\n:4\n" {
			t.Errorf("%v: completions %q", args, out.String())
		}
	}
}
