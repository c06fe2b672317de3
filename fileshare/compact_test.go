package fileshare

import (
	"fmt"
	"strings"
	"testing"
)

// entriesOf reads a stream's entries from a word per entry: a chunk name
// (one letter, upper case when live, a digit when waiting out its grace
// period), "r" before it for a relocation, "!" for a bad entry, "*" after
// it when the chunk is located in another stream (relocated into another
// stripe); every entry is 10 bytes. at says where the site locates each
// chunk, as Apply does: at its first entry, or its last relocation, unless
// located in another stream.
func entriesOf(spec string) (entries []entryMeta, at func([32]byte) (uint64, bool)) {
	loc := map[[32]byte]uint64{}
	elsewhere := map[[32]byte]bool{}
	for i, w := range strings.Fields(spec) {
		m := entryMeta{Seq: uint64(i + 1), Size: 10}
		switch {
		case w == "!":
			m.Bad = true
		case strings.HasPrefix(w, "r"):
			m.Reloc = true
			w = w[1:]
			fallthrough
		default:
			var other bool
			w, other = strings.CutSuffix(w, "*")
			m.Hash[0] = strings.ToLower(w)[0]
			m.Hash[1] = w[0] // upper case: live
			if _, ok := loc[m.Hash]; !ok || m.Reloc {
				loc[m.Hash] = m.Seq
			}
			elsewhere[m.Hash] = elsewhere[m.Hash] || other
		}
		entries = append(entries, m)
	}
	return entries, func(h [32]byte) (uint64, bool) {
		seq, ok := loc[h]
		return seq, ok && !elsewhere[h]
	}
}

func liveOf(h [32]byte) bool    { return h[1] >= 'A' && h[1] <= 'Z' }
func waitingOf(h [32]byte) bool { return h[1] >= '0' && h[1] <= '9' }

func TestPlanCompaction(t *testing.T) {
	for _, tc := range []struct {
		name, entries string
		limit         uint64
		maxMove       int64
		want          string // Upto and the seqs moved
	}{
		{"empty", "", 0, 1 << 20, "none"},
		{"all dead: plain truncation", "a b c d", 4, 1 << 20, "none"},
		{"live first, a quarter", "A b c d", 4, 1 << 20, "upto 4 move [1]"},
		{"live first, a third", "A b c", 3, 1 << 20, "none"},
		{"too much live", "A b C d", 4, 1 << 20, "none"},
		{"stops before the live tail", "A b c d e f g h I J", 10, 1 << 20, "upto 8 move [1]"},
		{"within limit", "A b c d e f g h", 4, 1 << 20, "upto 4 move [1]"},
		{"relocated beyond the prefix", "A b c d e f g h rA", 8, 1 << 20, "none"},
		{"relocated within the prefix", "A b c rA d e f g h i j k l m n o", 16, 1 << 20, "upto 16 move [4]"},
		{"duplicate live entry moved once", "A A b c d e f g h", 9, 1 << 20, "upto 9 move [1]"},
		{"bad entries are dead", "A ! ! !", 4, 1 << 20, "upto 4 move [1]"},
		{"move bound", "A b c d e f g h", 8, 5, "none"},
		{"two live chunks", "A b c d E f g h i j k l m n o p", 16, 1 << 20, "upto 16 move [1 5]"},
		{"stops before a chunk in its grace period", "A b c d e f g h 1 j k l m n o p", 16, 1 << 20, "upto 8 move [1]"},
		{"a chunk in its grace period blocks", "A b c 1 e f g h", 8, 1 << 20, "none"},
		{"relocated into another stream", "A* b c d e f g h", 8, 1 << 20, "none"},
		{"dead before the first live: plain truncation frees it", "a b c D", 4, 1 << 20, "none"},
		{"dead before and after the first live", "a b c D e f g h", 8, 1 << 20, "upto 8 move [4]"},
		{"no more dead after the live", "a b c D E f", 6, 1 << 20, "none"},
		{"one of two relocated into another stream", "A* b c d E f g h i j k l m n o p", 16, 1 << 20, "upto 16 move [5]"},
		{"located in another stream, old entries dead", "A* A* b c D e f g", 8, 1 << 20, "upto 8 move [5]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			entries, at := entriesOf(tc.entries)
			c := planCompaction(entries, tc.limit, liveOf, waitingOf, at, RelocateRatio, tc.maxMove)
			got := "none"
			if len(c.Move) > 0 {
				var seqs []uint64
				for _, m := range c.Move {
					seqs = append(seqs, m.Seq)
				}
				got = fmt.Sprintf("upto %d move %v", c.Upto, seqs)
			}
			if got != tc.want {
				t.Errorf("planCompaction(%q, limit %d) = %s, want %s", tc.entries, tc.limit, got, tc.want)
			}
		})
	}
}
