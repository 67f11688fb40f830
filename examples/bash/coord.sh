# What the bash examples share: the sidecar's address, and event streams
# followed through restarts of the sidecar. Sourced by lock.sh,
# follow-election.sh and throughput-share.sh from their own folder (copy it with
# them): it sets prog, addr and via (or exits 1 on a COORD_ADDR in no form
# below) and defines functions. Needs bash and curl.

prog=${0##*/} # the script's name, for its messages

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
	echo "$prog: COORD_ADDR=${COORD_ADDR-}: want http://HOST:PORT, https://HOST:PORT, HOST:PORT or unix:/PATH" >&2
	exit 1
fi
addr=${addr%/}

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

# hold_lease keeps the lease $lease alive by holding its event stream open,
# opening it again after a break (its last event id kept in $tmp/lease). When
# the lease is gone (404, the stream's end event, or TTL seconds, default 10,
# without reaching the sidecar) it says so and tells the script (SIGUSR1), which
# exits 1.
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
	echo "$prog: the lease ended ($why)" >&2
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

# next_line reads the next line of the stream on fd 3 into $line; it fails once
# $timeout seconds (0: no limit) have passed since the script started (SECONDS
# counts from there) or when the stream ends.
next_line() {
	if [ "$timeout" -eq 0 ]; then
		IFS= read -r line <&3
	else
		local left=$((timeout - SECONDS))
		[ "$left" -gt 0 ] && IFS= read -r -t "$left" line <&3
	fi
}
