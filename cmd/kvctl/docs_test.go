package main

import (
	"bufio"
	"bytes"
	"os"
	"strings"
	"testing"
)

// TestDocsPredicates runs every `$ kvctl` line of docs/predicates.md and
// compares what it prints (stdout, then stderr) with the lines under it.
func TestDocsPredicates(t *testing.T) {
	t.Chdir("../..") // the doc's paths are from the repository's root
	f, err := os.Open("docs/predicates.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var args []string
	var want []string
	ran := 0
	check := func() {
		if args == nil {
			return
		}
		var out, errOut bytes.Buffer
		run(args, &out, &errOut)
		got := strings.TrimRight(out.String()+errOut.String(), "\n")
		if w := strings.Join(want, "\n"); got != w {
			t.Errorf("kvctl %s:\n got %s\nwant %s", strings.Join(args, " "), got, w)
		}
		ran++
		args, want = nil, nil
	}
	sc := bufio.NewScanner(f)
	inBlock := false
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "```"):
			check()
			inBlock = !inBlock
		case inBlock && strings.HasPrefix(line, "$ kvctl "):
			check()
			args = shellWords(t, strings.TrimPrefix(line, "$ kvctl "))
		case inBlock && args != nil:
			want = append(want, line)
		}
	}
	if ran < 10 {
		t.Fatalf("ran %d examples of docs/predicates.md, want its dozen or so", ran)
	}
}

// shellWords splits a command line as sh does for words in single quotes
// and plain words, which is all the docs use.
func shellWords(t *testing.T, s string) []string {
	var out []string
	var w strings.Builder
	inWord, quoted := false, false
	for _, r := range s {
		switch {
		case r == '\'':
			quoted, inWord = !quoted, true
		case r == ' ' && !quoted:
			if inWord {
				out = append(out, w.String())
				w.Reset()
				inWord = false
			}
		default:
			w.WriteRune(r)
			inWord = true
		}
	}
	if quoted {
		t.Fatalf("unbalanced quote in %q", s)
	}
	if inWord {
		out = append(out, w.String())
	}
	return out
}
