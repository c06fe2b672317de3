package main

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stabilizer/stabilizer/pubsub/pubsubclient/pubsubclienttest"
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
		f := filepath.Join(t.TempDir(), "stdin")
		if err := os.WriteFile(f, []byte(tc.stdin), 0o600); err != nil {
			t.Fatal(err)
		}
		in, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		saved := os.Stdin
		os.Stdin = in
		defer func() { os.Stdin = saved; in.Close() }()
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
retention    all
`},
		{args: []string{"topic", "create", "orders"}, stdout: `topic orders, .*`},
		{args: []string{"topic", "create", "orders", "--publish-ack", "all"}, code: 1,
			stderr: "kvctl: topic orders exists with another definition (publish_ack majority, delivery \"\"): see it with kvctl topic inspect orders"},
		{args: []string{"topic", "create", "jobs", "--publish-ack", "audience", "--delivery", "majority", "--max-message-bytes", "64", "-o", "json"},
			stdout: `\{"topic":\{"name":"jobs","publish_ack":"audience","delivery":"majority","max_message_bytes":64,"retention":\{"policy":"all"\}\},"created_at":"us-east-1",.*\}
`},
		{args: []string{"topic", "create", "x", "--retention", "forever"}, code: 2, stderr: `--retention "forever": unknown policy`},
		{args: []string{"topic", "create", "x", "--retention", "limits"}, code: 1, stderr: `retention policy "limits" is not honoured yet`},
		{args: []string{"topic", "create"}, code: 2, stderr: "takes 1 argument(s) (NAME), got 0"},
		{args: []string{"topic", "list"}, stdout: `TOPIC   PUBLISH-ACK  DELIVERY        ORIGINS  MESSAGES  SUBSCRIPTIONS
jobs    audience     majority        0        0         0
orders  majority     persisted here  0        0         0
`},
		{args: []string{"topic", "list", "-o", "json"}, stdout: `\[\{"topic":\{"name":"jobs".*\},\{"topic":\{"name":"orders".*\}\]
`},
		{args: []string{"topic", "list", "-o", "yaml"}, code: 2, stderr: "unknown output format"},
		{args: []string{"topic", "inspect", "orders", "-o", "table"}, stdout: `topic orders, .*`},
		{args: []string{"topic", "inspect", "nope"}, code: 1,
			stderr: `kvctl: topic "nope" does not exist at ` + site.Addr + `: create it with kvctl topic create nope`},
		{args: []string{"topic", "delete", "jobs"}, stdout: "deleted topic jobs\n"},
		{args: []string{"topic", "delete", "jobs", "-o", "json"}, code: 1, stderr: `topic "jobs" does not exist at`},
	})
}

// TestTopicCompletion: TOPIC arguments complete with the site's topics.
func TestTopicCompletion(t *testing.T) {
	cl := pubsubclienttest.NewCluster()
	site := cl.Start(t, "us-east-1")
	(pubsubCase{args: []string{"topic", "create", "orders"}, stdout: ".*"}).run(t, site.Addr)
	(pubsubCase{args: []string{"topic", "create", "jobs"}, stdout: ".*"}).run(t, site.Addr)
	for _, args := range [][]string{{"topic", "inspect", ""}, {"topic", "delete", ""}} {
		var out, errOut bytes.Buffer
		if code := run(append([]string{"__complete", "--endpoint", site.Addr}, args...), &out, &errOut); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errOut.String())
		}
		if out.String() != "jobs\norders\n:4\n" {
			t.Errorf("%v: completions %q", args, out.String())
		}
	}
}
