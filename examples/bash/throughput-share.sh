#!/usr/bin/env bash
# Join a throughput group, then print this member's share whenever it changes.
#
#   throughput-share.sh GROUP [ID]
#
# Prints "joined ID", then "share S version V": first the share the join answered,
# then one line each time the group's allocation gives this member another share.
# Stops after $EVENTS share lines or $TIMEOUT seconds (0, the default for both: no
# limit), or on Ctrl-C. Leaving closes the lease's stream, which ends the
# membership at once: the others share the limit. A restart of the sidecar
# costs nothing: its streams are opened again (see hold_lease, follow); the
# script exits 1 when the lease is gone.
#
# Environment: COORD_ADDR (default http://127.0.0.1:8080), WEIGHT (default 1), TTL
# (seconds, default 10), EVENTS, TIMEOUT. Needs bash and curl, nothing else.
set -euo pipefail

# COORD_ADDR is a URL (http://HOST:PORT, https://HOST:PORT), HOST:PORT (plain
# http) or unix:/PATH (a unix socket). Every curl below gets "${via[@]}": nothing
# over TCP, --unix-socket PATH for a socket (then the URL is http://localhost).
addr=${COORD_ADDR:-http://127.0.0.1:8080} via=()
case $addr in
unix:*)
	socket=${addr#unix:}
	socket=${socket#//} # unix:///run/coord.sock
	via=(--unix-socket "$socket") addr=http://localhost
	[ -n "$socket" ] || addr=""
	;;
http://?* | https://?*) ;;
*://* | */* | *[?#]*) addr="" ;;
:[0-9]*) addr=http://127.0.0.1$addr ;;
?*:[0-9]*) addr=http://$addr ;;
*) addr="" ;;
esac
if [ -z "$addr" ]; then
	echo "throughput-share.sh: COORD_ADDR=${COORD_ADDR-}: want http://HOST:PORT, https://HOST:PORT, HOST:PORT or unix:/PATH" >&2
	exit 1
fi
addr=${addr%/}

group=${1:?usage: throughput-share.sh GROUP [ID]}
id=${2:-member-$$}
events=${EVENTS:-0} timeout=${TIMEOUT:-0}

# 1. Join. The answer (201) is {"group","id","lease","share","version"}.
if ! joined=$(curl "${via[@]}" -sS --fail-with-body -X POST "$addr/v1/throughput/$group/members?id=$id&weight=${WEIGHT:-1}&ttl=${TTL:-10}s"); then
	echo "throughput-share.sh: could not join: $joined" >&2
	exit 1
fi
lease=$(sed -n 's/.*"lease":"\([^"]*\)".*/\1/p' <<<"$joined")
share=$(sed -n 's/.*"share":\([0-9]*\).*/\1/p' <<<"$joined")
joined_version=$(sed -n 's/.*"version":\([0-9]*\).*/\1/p' <<<"$joined")

# A restart of the sidecar (kill -USR2, or kill -9 and a successor on the same
# --state-dir) ends its streams: both are opened again (the lease's with
# Last-Event-ID) after 50 ms doubling to 1 s, each curl run so that the script's
# end (a SIGTERM to its loop) ends it too, and the membership goes on.
tmp=$(mktemp -d)

# now_ms is the time in milliseconds; nap sleeps $1 milliseconds.
now_ms() {
	local t=${EPOCHREALTIME/[.,]/}
	echo $((10#$t / 1000))
}
nap() { sleep "$(($1 / 1000)).$(printf %03d $(($1 % 1000)))"; }

# run_curl runs curl with the arguments given; a SIGTERM to the (sub)shell that
# runs it ends that curl too, and the shell.
run_curl() {
	curl "$@" &
	local c=$!
	trap 'kill $c 2>/dev/null; exit 143' TERM
	wait "$c"
}

# hold_lease keeps the lease alive by holding its event stream open, opening it
# again after a break. When the lease is gone (404, the stream's end event, or
# TTL seconds without reaching the sidecar) it says so and tells the script
# (SIGUSR1), which exits 1.
hold_lease() {
	local code id pause=50 since why
	since=$(now_ms)
	while :; do
		id=$(sed -n 's/^id: *//p' "$tmp/lease" 2>/dev/null | tail -n 1) || true
		run_curl "${via[@]}" -sN -o "$tmp/lease" -w '%{http_code}' ${id:+-H "Last-Event-ID: $id"} \
			"$addr/v1/leases/$lease/events" >"$tmp/code" || true
		code=$(<"$tmp/code")
		why=$(sed -n 's/^event: *\(lost\|expired\|revoked\)$/lease \1/p' "$tmp/lease" 2>/dev/null) || true
		case $code in
		200) since=$(now_ms) pause=50 ;; # it was open: broken now
		000 | 5?? | 429) ;;               # not reached, or restarting
		*) why=${why:-"GET /v1/leases/$lease/events: $code"} ;;
		esac
		if [ -z "$why" ] && [ $(($(now_ms) - since)) -gt $((${TTL:-10} * 1000)) ]; then
			why="the sidecar not reached for ${TTL:-10}s"
		fi
		[ -z "$why" ] || break
		nap "$pause"
		pause=$((pause >= 500 ? 1000 : pause * 2))
	done
	echo "throughput-share.sh: the lease ended ($why)" >&2
	kill -USR1 $$
}

# follow writes the event stream at $addr$1 to stdout for good, opening it
# again after a break; it then starts with the state now.
follow() {
	local rc pause=50
	while :; do
		rc=0
		run_curl "${via[@]}" -sN --fail "$addr$1" || rc=$?
		case $rc in 0 | 18 | 56 | 92) pause=50 ;; esac # it was open: ended or broken now
		nap "$pause"
		pause=$((pause >= 500 ? 1000 : pause * 2))
	done
}

echo "joined $id"
echo "share $share version $joined_version"
printed=1
if [ "$events" -gt 0 ] && [ "$printed" -ge "$events" ]; then
	exit 0
fi

# 2. Keep the membership's lease alive by holding its event stream open: the lease
#    does not expire while the stream is open, and is revoked when it closes
#    (hold_lease: it ends the script when the lease ends otherwise).
hold_lease </dev/null >/dev/null &
lease_stream=$!
# 3. Follow the group: `throughput` events (data: the group, as GET
#    /v1/throughput/GROUP answers it), the current allocation first, then every new
#    one; `leader` events (a new computing member) do not matter here. After a
#    restart of the sidecar, the allocation now again.
exec 3< <(follow "/v1/throughput/$group/events")
group_stream=$!
trap 'kill $lease_stream $group_stream 2>/dev/null || true; rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM
trap 'exit 1' USR1

# next_line reads the stream's next line into $line; it fails once TIMEOUT has
# passed since the script started (SECONDS counts from there) or when the
# stream ends.
next_line() {
	if [ "$timeout" -eq 0 ]; then
		IFS= read -r line <&3
	else
		local left=$((timeout - SECONDS))
		[ "$left" -gt 0 ] && IFS= read -r -t "$left" line <&3
	fi
}

me=${id//./\\.} # the id as a sed pattern
event=""
while next_line; do
	case $line in
	event:*) event=${line#event: } ;;
	data:*)
		[ "$event" = throughput ] || continue
		# {"group":"g","leader":"m1","limit":1000,"members":[{"id":"m1","leader":true,"share":500,"weight":1},...],"version":3}
		version=$(sed -n 's/.*"version":\([0-9]*\).*/\1/p' <<<"$line")
		[ "$version" -ge "$joined_version" ] || continue # older than the join's answer
		now=$(sed -n "s/.*\"id\":\"$me\",[^}]*\"share\":\([0-9]*\).*/\1/p" <<<"$line")
		if [ -z "$now" ]; then
			echo "throughput-share.sh: $id is no longer a member of $group (its lease ended?)" >&2
			exit 1
		fi
		if [ "$now" != "$share" ]; then
			share=$now
			echo "share $share version $version"
			printed=$((printed + 1))
			if [ "$events" -gt 0 ] && [ "$printed" -ge "$events" ]; then
				exit 0
			fi
		fi
		;;
	esac
done
if [ "$timeout" -gt 0 ] && [ "$SECONDS" -ge "$timeout" ]; then
	exit 0 # TIMEOUT passed
fi
echo "throughput-share.sh: the event stream ended" >&2
exit 1
