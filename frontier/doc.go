// Package frontier is the stability-frontier predicate language: it compiles
// a user's consistency condition, written over one stream's acknowledgement
// table, into a program that says how far that condition holds.
//
// The one idea: a predicate is a monotone function from acks to a seq. Every
// accepted predicate only combines ack reads with min (all hold), max (any
// holds) and k-of-n thresholds, so more acks never lower the frontier, and
// the frontier never exceeds the largest ack it reads.
//
// # Usage
//
//	s := &frontier.Schema{Sites: []string{"us-east-1", "eu-west-1", "ap-south-1"}}
//	p, err := frontier.Compile("majority(persisted(sites))", s)
//	...
//	// acks[level*len(s.Sites)+site], level 0 received, 1 persisted, 2 applied.
//	seq, err := p.Eval(acks, origin, self)
//
// Compile parses with expr-lang/expr's parser, checks the tree against a
// whitelist and the schema, and lowers it into a small tree over the flat
// ack slice. Eval walks that tree with a fixed stack buffer: it allocates
// nothing and takes tens of nanoseconds for ten sites (see bench_test.go,
// which also runs the same predicates on expr's generic VM for comparison).
//
// # The language
//
// DESIGN.md §3 is the contract. Choices where it is silent or ambiguous:
//
//   - Lists are sets of sites in configuration order: a site named twice
//     counts once, in quorum sizes too.
//   - A list literal holds either sites (quoted names, origin, self) or seqs
//     (any predicate), as in kth_max(2, [persisted("a"), max(applied(others()))]).
//   - min and max take any mix of seqs and lists of seqs.
//   - `none` is received(origin): the origin acknowledges `received` for a
//     message when Append assigns its seq, so it is the origin's head.
//   - The k of kth_max, kth_min and quorum must be an integer literal with
//     1 <= k <= the list's length. A list that excludes origin or self, such
//     as except(group("eu"), origin), has a length that depends on the
//     stream; k is checked against its longest form, and for a stream whose
//     list is shorter than k the threshold never holds (evaluates to 0).
//     Predicate.Satisfiable tells whether a predicate can hold for an origin.
//   - A list that is empty for some stream (all its members excluded)
//     proves nothing: min, max and thresholds over it are 0. A list that is
//     empty whatever the stream is a compile error.
//   - majority(list) is kth_max(len/2+1, list) with len the list's length
//     for the stream being evaluated.
//   - Errors are one line, "line:column: cause", columns counted in
//     characters from 1; Error.Snippet adds the line and a caret. Unknown
//     names list the known ones. Site names must be quoted; an unquoted
//     us-east-1 is reported as such rather than as arithmetic.
//   - Limits: 4096 bytes of source, 256 syntax nodes, 64 sites, 64 levels.
//
// # Duals
//
// Predicate.Dual swaps min and max and turns k-of-n into (n-k+1)-of-n.
// Predicate.Holds reads a predicate as a condition on which sites hold a
// write; every set satisfying the dual meets every set satisfying the
// predicate, which is what a quorum read needs. A threshold that cannot
// hold for a stream (k above its list's length there) has, strictly, an
// always-true dual; we make it never hold instead, which keeps every
// frontier bounded by real acks and the intersection property intact, at the
// price that a read quorum through such a clause cannot complete.
//
// # Concurrency
//
// A compiled *Predicate is immutable and safe for concurrent use. A Schema
// must not change after it was used to compile.
package frontier
