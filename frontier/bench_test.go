package frontier

import (
	"fmt"
	"testing"
)

func tenSites() *Schema {
	s := &Schema{Groups: map[string][]string{}}
	for i := range 10 {
		s.Sites = append(s.Sites, fmt.Sprintf("site-%d", i))
	}
	s.Groups["us"] = s.Sites[0:4]
	s.Groups["eu"] = s.Sites[4:7]
	s.Groups["ap"] = s.Sites[7:10]
	return s
}

// The five examples of DESIGN.md §3; the last is the five-clause
// benchmark's predicate (one copy per continent).
var designExamples = []string{
	"min(persisted(sites))",
	"majority(persisted(sites))",
	"max(persisted(others()))",
	`min(persisted(origin), quorum(2, received(group("eu"))))`,
	`min(max(persisted(group("us"))), max(persisted(group("eu"))), max(persisted(group("ap"))))`,
}

func benchTable(s *Schema) []uint64 {
	acks := make([]uint64, s.TableSize())
	for i := range acks {
		acks[i] = uint64(1000 + (i*7919)%97)
	}
	return acks
}

func benchEval(b *testing.B, src string) {
	s := tenSites()
	p, err := Compile(src, s)
	if err != nil {
		b.Fatal(err)
	}
	acks := benchTable(s)
	b.ReportAllocs()
	var sink uint64
	for b.Loop() {
		v, _ := p.Eval(acks, 3, 5)
		sink += v
	}
	_ = sink
}

func benchExprVM(b *testing.B, src string) {
	s := tenSites()
	r, err := newExprRef(src, s)
	if err != nil {
		b.Fatal(err)
	}
	acks := benchTable(s)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.eval(acks, 3, 5); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEvalMajority10(b *testing.B)   { benchEval(b, designExamples[1]) }
func BenchmarkEvalFiveClause(b *testing.B)   { benchEval(b, designExamples[4]) }
func BenchmarkEvalAll10(b *testing.B)        { benchEval(b, designExamples[0]) }
func BenchmarkEvalOriginQuorum(b *testing.B) { benchEval(b, designExamples[3]) }

func BenchmarkExprVMMajority10(b *testing.B) { benchExprVM(b, designExamples[1]) }
func BenchmarkExprVMFiveClause(b *testing.B) { benchExprVM(b, designExamples[4]) }

func BenchmarkCompile(b *testing.B) {
	s := tenSites()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Compile(designExamples[4], s); err != nil {
			b.Fatal(err)
		}
	}
}
