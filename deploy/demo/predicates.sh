#!/usr/bin/env bash
# The predicate demo: compiles and evaluates the example predicates of
# docs/predicates.md against one stream's ack table and says what each answer means.
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
go build -o "$bin/kvctl" ./cmd/kvctl
kvctl="$bin/kvctl"
table=deploy/demo/acks.json

echo "== One stream's ack table: the kv stream of us-east-1, seen from eu-west-1 =="
echo "   (each entry: the highest seq a site acknowledged at that level, with nothing missing below it)"
echo
"$kvctl" predicate eval none --table "$table" -o table | sed -n '1,6p'
echo

show() { # predicate, explanation
	local f d
	f=$("$kvctl" predicate eval "$1" --table "$table")
	d=$("$kvctl" predicate dual "$1" --table "$table")
	printf '%-92s -> %s\n' "$1" "$f"
	printf '    %s\n' "$2" "writes 1..$f of this stream are done under it; a quorum read must hear from sites satisfying: $d"
	echo
}

echo "== Examples of docs/predicates.md =="
echo
show 'min(persisted(sites))' \
	"every site persisted: held back by ap-south-1, the slowest."
show 'majority(persisted(sites))' \
	"3 of 4 sites persisted: the third-highest persisted seq."
show 'max(persisted(others()))' \
	"at least one site other than the origin persisted: us-west-2 got furthest."
show 'min(persisted(origin), quorum(2, received(group("us"))))' \
	"the origin persisted and both US sites received: the smaller of the two."
show 'min(max(persisted(group("us"))), max(persisted(group("eu"))), max(persisted(group("ap"))))' \
	"a copy on every continent: the slowest continent, ap, decides."
echo "== Built-in names =="
echo
for name in none local majority all one_remote; do
	printf '%-12s -> %s\n' "$name" "$("$kvctl" predicate eval "$name" --table "$table")"
done
echo
echo "== Custom levels: the application's own 'verified' acknowledgement =="
echo
show 'min(level("verified", self), majority(persisted(sites)))' \
	"verified here at eu-west-1 and persisted by a majority."
echo "== Predicates the language refuses (they could move a frontier backwards, or name what does not exist) =="
echo
for bad in 'persisted(origin) - 1' 'persisted(origin) > 100' 'kth_max(5, persisted(sites))' 'min(persisted("eu-wst-1"))' 'quorum(2, persisted(group("asia")))'; do
	printf '%-40s ' "$bad"
	"$kvctl" predicate check "$bad" --table "$table" 2>&1 || true
done
