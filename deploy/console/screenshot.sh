#!/usr/bin/env bash
# Takes a screenshot of the cluster console (the status page at a site's
# HTTP address) so that a person can look at it: a three-region cluster on
# the emulated WAN (wanbed, ec2-3), some writes, a topic with a durable
# subscription that leaves its messages unacked, then ap-northeast-1 cut off
# from both other regions so that `all` stalls; then headless Chromium
# (Debian's package: apt-get install -y chromium) renders us-east-1's
# console. Not run in CI.
#
#   deploy/console/screenshot.sh [OUT.png]     # default deploy/console/console.png
#
# DIR (default: a temporary folder) holds the testbed; CHROMIUM names the
# browser binary (default: chromium).
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-deploy/console/console.png}
case $out in /*) ;; *) out=$PWD/$out ;; esac
dir=${DIR:-$(mktemp -d /tmp/console-bed.XXXXXX)}
chromium=${CHROMIUM:-chromium}
command -v "$chromium" >/dev/null || { echo "screenshot.sh: $chromium not found (apt-get install -y chromium)" >&2; exit 1; }

go build -o bin/ ./cmd/...
sub= sync=
cleanup() {
	for pid in $sub $sync; do kill "$pid" 2>/dev/null || true; done
	bin/wanbed down --dir "$dir" >/dev/null || true
}
trap cleanup EXIT

up=$(bin/wanbed up --topology ec2-3 --dir "$dir" -o json)
# Sites in topology order: us-east-1, eu-west-1, ap-northeast-1.
clients=($(sed -n 's/.*"client": "\(.*\)".*/\1/p' <<<"$up"))
https=($(sed -n 's/.*"http": "\(.*\)".*/\1/p' <<<"$up"))
us=${clients[0]} eu=${clients[1]} ap=${clients[2]}
page="http://${https[0]}/"
echo "cluster up in $dir; console at $page"

# Waits (up to $2 seconds) until us-east-1's status.json matches $1.
wait_status() {
	for _ in $(seq 1 "$(($2 * 4))"); do
		curl -fsS "http://${https[0]}/status.json" | grep -q "$1" && return 0
		sleep 0.25
	done
	echo "screenshot.sh: status.json never matched $1" >&2
	return 1
}
wait_status '"Site":"ap-northeast-1","Self":false,"Connected":true,"RTT":"[0-9]' 30

# Writes from two regions under several predicates, spread over some
# seconds so that the sparklines have a history.
for i in $(seq 1 12); do
	bin/kvctl --endpoint "$us" put "jobs/$i" "{\"state\":\"queued\",\"step\":$i}" --wait majority >/dev/null
	bin/kvctl --endpoint "$eu" put "ckpt/run-$i" "step-$((i * 100))" --wait all >/dev/null
	[ $((i % 4)) = 0 ] && bin/kvctl --endpoint "$ap" put "region/ap/$i" up --wait one_remote >/dev/null
	sleep 0.5
done
bin/kvctl --endpoint "$us" topic create jobs.events --publish-ack majority >/dev/null
# A durable subscriber that never acks: its messages stay unacked.
bin/kvctl --endpoint "$us" sub jobs.events --durable dashboard --start all --no-ack --ack-wait 10m >/dev/null &
sub=$!
bin/kvctl --endpoint "$us" pub jobs.events started-1 started-2 started-3 started-4 started-5 >/dev/null

# ap-northeast-1 cut off: the cut connections time out, then what
# us-east-1 writes is persisted by a majority, never by all.
bin/wanbed link set --dir "$dir" us-east-1 ap-northeast-1 --cut >/dev/null
bin/wanbed link set --dir "$dir" eu-west-1 ap-northeast-1 --cut >/dev/null
wait_status '"Connected":{"ap-northeast-1":false' 60
# A share whose versions become visible once every region holds them: the
# one published now stays pending.
mkdir -p "$dir/share"
bin/stabsync init "$dir/share" --share ckpt --site "$us" --create --visibility all --settle 500ms >/dev/null
echo "step 1200" >"$dir/share/latest.txt"
bin/stabsync run "$dir/share" >"$dir/stabsync.log" 2>&1 &
sync=$!
for i in $(seq 13 20); do
	bin/kvctl --endpoint "$us" put "jobs/$i" "{\"state\":\"queued\",\"step\":$i}" --wait majority >/dev/null
	sleep 1
done
wait_status '"Stalled":\[{' 30
sleep 2

"$chromium" --headless --no-sandbox --disable-gpu --hide-scrollbars --screenshot="$out" \
	--window-size=1400,2000 "$page" 2>/dev/null
echo "wrote $out"
