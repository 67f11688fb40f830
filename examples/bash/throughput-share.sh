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
# (seconds, default 10), EVENTS, TIMEOUT. Needs bash and curl, and coord.sh
# beside it.
set -euo pipefail

. "$(dirname "${BASH_SOURCE[0]}")/coord.sh" # the address; the lease and event streams, followed

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
