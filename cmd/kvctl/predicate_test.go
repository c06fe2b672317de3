package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestPredicateCommands(t *testing.T) {
	const table = "testdata/acks.json"
	for _, tc := range []struct {
		args   []string
		code   int
		stdout string
		stderr string // substring
	}{
		{args: []string{"predicate", "eval", "majority", "--table", table}, stdout: "100\n"},
		{args: []string{"predicate", "eval", "majority(persisted(sites))", "--table", table, "-o", "json"}, stdout: `{"frontier":100}` + "\n"},
		{args: []string{"predicate", "eval", `min(persisted(origin), quorum(1, received(group("eu"))))`, "--table", table}, stdout: "90\n"},
		{args: []string{"predicate", "eval", `level("verified", self)`, "--table", table}, stdout: "75\n"},
		{args: []string{"predicate", "eval", "none", "--table", table}, stdout: "120\n"},
		{args: []string{"predicate", "check", "all", "--table", table}, stdout: "ok\n"},
		{args: []string{"predicate", "dual", "one_remote", "--table", table}, stdout: "min(persisted(others()))\n"},
		{args: []string{"predicate", "dual", "one_remote", "--table", table, "-o", "json"}, stdout: `{"dual":"min(persisted(others()))","frontier":80}` + "\n"},
		{args: []string{"predicate", "eval", `persisted("eu-wst-1")`, "--table", table}, code: 1,
			stderr: `kvctl: 1:11: unknown site "eu-wst-1" (known: us-east-1, us-west-2, eu-west-1)`},
		{args: []string{"predicate", "check", "persisted(origin) + 1", "--table", table}, code: 1, stderr: "1:19: arithmetic"},
		{args: []string{"predicate", "eval", "all"}, code: 2, stderr: "--table FILE is required"},
		{args: []string{"predicate", "eval", "--table", table}, code: 2, stderr: "takes 1 argument(s) (EXPR), got 0"},
		{args: []string{"predicate", "eval", "all", "--table", "testdata/missing.json"}, code: 1, stderr: "no such file"},
		{args: []string{"predicate", "eval", "all", "--table", table, "-o", "yaml"}, code: 2, stderr: `unknown output format`},
		{args: []string{"predicate", "eval", "all", "--table", table, "--bogus"}, code: 2, stderr: "unknown flag: --bogus"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := run(tc.args, &out, &errOut)
			if code != tc.code {
				t.Fatalf("exit %d, want %d; stderr: %s", code, tc.code, errOut.String())
			}
			if tc.code == 0 && out.String() != tc.stdout {
				t.Fatalf("stdout %q, want %q", out.String(), tc.stdout)
			}
			if tc.code != 0 && (out.Len() != 0 || !strings.Contains(errOut.String(), tc.stderr)) {
				t.Fatalf("stdout %q, stderr %q; want nothing on stdout and %q on stderr", out.String(), errOut.String(), tc.stderr)
			}
			if tc.code != 0 && strings.Count(strings.TrimSpace(errOut.String()), "\n") != 0 {
				t.Fatalf("error is not one line: %q", errOut.String())
			}
		})
	}
}
