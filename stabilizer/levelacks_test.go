package stabilizer_test

import (
	"slices"
	"testing"

	"github.com/stabilizer/stabilizer/stabilizer"
	"github.com/stabilizer/stabilizer/stabilizer/stabilizertest"
)

func TestLevelAcks(t *testing.T) {
	l := stabilizer.LevelAcks{Level: "persisted", Sites: []string{"us-east-1", "eu-west-1", "ap-south-1"}, Seqs: []uint64{812, 790, 0}}
	if got, want := l.String(), "persisted: us-east-1=812 eu-west-1=790 ap-south-1=0"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	for _, c := range []struct {
		seq  uint64
		want []string
	}{
		{0, nil},
		{1, []string{"ap-south-1=0"}},
		{791, []string{"eu-west-1=790", "ap-south-1=0"}},
		{813, []string{"us-east-1=812", "eu-west-1=790", "ap-south-1=0"}},
	} {
		if got := l.Below(c.seq); !slices.Equal(got, c.want) {
			t.Errorf("Below(%d) = %q, want %q", c.seq, got, c.want)
		}
	}
}

// PredicateAcks picks the levels a predicate reads, by name or source.
func TestPredicateAcks(t *testing.T) {
	c := stabilizertest.NewCluster(t, stabilizertest.Options{Sites: []string{"a", "b"}, Levels: []string{"verified"},
		Predicates: map[string]string{"checked": "min(level(\"verified\", sites))"}})
	n := c.Node("a")
	acks := []uint64{1, 2, 3, 4, 5, 6, 7, 8} // received, persisted, applied, verified × a, b
	levels := func(ls []stabilizer.LevelAcks) (out []string) {
		for _, l := range ls {
			out = append(out, l.String())
		}
		return out
	}
	for _, c := range []struct {
		pred string
		want []string
	}{
		{"checked", []string{"verified: a=7 b=8"}},
		{"majority(persisted(sites))", []string{"persisted: a=3 b=4"}},
		{"nonsense(", []string{"received: a=1 b=2", "persisted: a=3 b=4", "applied: a=5 b=6", "verified: a=7 b=8"}},
	} {
		if got := levels(n.PredicateAcks(t.Context(), c.pred, acks)); !slices.Equal(got, c.want) {
			t.Errorf("PredicateAcks(%q) = %q, want %q", c.pred, got, c.want)
		}
	}
}
