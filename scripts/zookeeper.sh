#!/usr/bin/env bash
# Local ZooKeeper for development, CI and the benchmarks (Debian/Ubuntu).
#
#   scripts/zookeeper.sh install             install Debian's zookeeper package if missing
#   scripts/zookeeper.sh start [DIR] [PORT]  start a server on 127.0.0.1:PORT (default .zk, 2181)
#   scripts/zookeeper.sh stop [DIR]          stop the server started by "start" in DIR
#   scripts/zookeeper.sh start-ensemble DIR BASE
#                                            start a 3-node ensemble in DIR/1..3: clients on
#                                            127.0.0.1:BASE..BASE+2, quorum on BASE+10..12,
#                                            leader election on BASE+20..22; fsync on, no
#                                            per-address connection limit (a fleet of
#                                            sidecars on one host all come from 127.0.0.1)
#   scripts/zookeeper.sh stop-ensemble DIR   stop the ensemble started in DIR
set -euo pipefail

JAR=/usr/share/java/zookeeper.jar
# slf4j-simple comes with the zookeeper package's dependencies; without a
# binding on the class path the server logs nothing at all.
SLF4J=/usr/share/java/slf4j-simple.jar
# The Netty server (secure client port, used by the TLS tests) also needs these
# jars of libnetty-java (a dependency of the zookeeper package) on the class path.
NETTY_JARS=(/usr/share/java/netty-codec.jar /usr/share/java/netty-resolver.jar /usr/share/java/netty-transport-native-unix-common.jar)
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

# fourletter PORT WORD: prints the server's answer to a four-letter word, or nothing.
fourletter() {
	timeout 2 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$0" && printf %s "$1" >&3 && cat <&3' "$1" "$2" 2>/dev/null || true
}

installed() {
	local f
	for f in "$JAR" "${NETTY_JARS[@]}"; do [ -f "$f" ] || return 1; done
}

install_zk() {
	installed && return 0
	local sudo=""
	if [ "$(id -u)" -ne 0 ]; then
		command -v sudo >/dev/null || { echo "zookeeper.sh: not root and no sudo; cannot install zookeeper" >&2; exit 1; }
		sudo=sudo
	fi
	echo "zookeeper.sh: installing Debian packages zookeeper and libnetty-java" >&2
	$sudo apt-get update -qq
	$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq zookeeper libnetty-java >/dev/null
	local f
	for f in "$JAR" "${NETTY_JARS[@]}"; do
		[ -f "$f" ] || { echo "zookeeper.sh: $f still missing after install" >&2; exit 1; }
	done
}

# ourpid DIR: prints the pid in DIR/zookeeper.pid if that process is alive and is a ZooKeeper server.
ourpid() {
	local pid
	pid="$(cat "$1/zookeeper.pid" 2>/dev/null)" || return 1
	[[ "$pid" =~ ^[0-9]+$ ]] || return 1
	grep -qa QuorumPeerMain "/proc/$pid/cmdline" 2>/dev/null || return 1
	echo "$pid"
}

stop_zk() {
	local dir="${1:-$ROOT/.zk}" pid
	if pid="$(ourpid "$dir")"; then
		kill "$pid" 2>/dev/null || true
		for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		kill -9 "$pid" 2>/dev/null || true
		echo "zookeeper.sh: stopped pid $pid"
	fi
	rm -f "$dir/zookeeper.pid"
}

# launch DIR PORT [CFG...]: starts a server (its zoo.cfg: the common lines,
# then CFG) in the background; await_zk then waits for it to serve.
launch() {
	local dir="$1" port="$2"
	shift 2
	mkdir -p "$dir/data"
	{
		cat <<CFG
tickTime=2000
dataDir=$dir/data
clientPort=$port
clientPortAddress=127.0.0.1
admin.enableServer=false
4lw.commands.whitelist=*
CFG
		local line
		for line in "$@"; do echo "$line"; done
	} >"$dir/zoo.cfg"
	local cp="$JAR"
	[ -f "$SLF4J" ] && cp="$cp:$SLF4J"
	local setsid=""
	command -v setsid >/dev/null && setsid=setsid # own session: survives the caller's Ctrl-C
	rm -f "$dir/zookeeper.pid"
	# The inner shell records its own pid, then becomes java.
	$setsid bash -c 'echo $$ >"$0/zookeeper.pid"; exec "$@"' "$dir" \
		java -Xmx256m -Dzookeeper.log.dir="$dir" -cp "$cp" \
		org.apache.zookeeper.server.quorum.QuorumPeerMain "$dir/zoo.cfg" \
		>"$dir/zookeeper.log" 2>&1 </dev/null &
}

# await_zk DIR PORT: waits up to 60 s for the server launched in DIR to serve
# on PORT; fails (printing its log's tail) if it does not.
await_zk() {
	local dir="$1" port="$2" deadline=$((SECONDS + 60)) pid=""
	while [ "$SECONDS" -lt "$deadline" ]; do
		# imok comes before the server serves; srvr reports a Mode once it does.
		if [ "$(fourletter "$port" ruok)" = imok ] && fourletter "$port" srvr | grep -q '^Mode:'; then
			echo "zookeeper.sh: serving on 127.0.0.1:$port (pid $(cat "$dir/zookeeper.pid"), log $dir/zookeeper.log)"
			return 0
		fi
		pid="$(cat "$dir/zookeeper.pid" 2>/dev/null || true)"
		if [ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null; then break; fi
		sleep 0.1
	done
	echo "zookeeper.sh: server did not come up on 127.0.0.1:$port; last log lines:" >&2
	tail -n 40 "$dir/zookeeper.log" >&2 || true
	return 1
}

start_zk() {
	local dir="${1:-$ROOT/.zk}" port="${2:-2181}"
	if [ "$(fourletter "$port" ruok)" = imok ]; then
		echo "zookeeper.sh: a server already answers on 127.0.0.1:$port; reusing it"
		return 0
	fi
	install_zk
	stop_zk "$dir" >/dev/null # a stale server of ours that does not answer
	mkdir -p "$dir"
	dir="$(cd "$dir" && pwd)"
	launch "$dir" "$port"
	await_zk "$dir" "$port" || { stop_zk "$dir" >/dev/null; exit 1; }
}

start_ensemble() {
	local dir="$1" base="$2" n servers=()
	install_zk
	stop_ensemble "$dir" >/dev/null
	mkdir -p "$dir"
	dir="$(cd "$dir" && pwd)"
	for n in 1 2 3; do
		servers+=("server.$n=127.0.0.1:$((base + 9 + n)):$((base + 19 + n))")
	done
	for n in 1 2 3; do
		mkdir -p "$dir/$n/data"
		echo "$n" >"$dir/$n/data/myid"
		launch "$dir/$n" "$((base + n - 1))" initLimit=10 syncLimit=5 maxClientCnxns=0 "${servers[@]}"
	done
	for n in 1 2 3; do
		await_zk "$dir/$n" "$((base + n - 1))" || { stop_ensemble "$dir" >/dev/null; exit 1; }
	done
}

stop_ensemble() {
	local n
	for n in 1 2 3; do stop_zk "$1/$n"; done
}

case "${1:-}" in
install) install_zk ;;
start) start_zk "${2:-}" "${3:-}" ;;
stop) stop_zk "${2:-}" ;;
start-ensemble) start_ensemble "${2:?DIR}" "${3:?BASE port}" ;;
stop-ensemble) stop_ensemble "${2:?DIR}" ;;
*)
	echo "usage: $0 install | start [DIR] [PORT] | stop [DIR] | start-ensemble DIR BASE | stop-ensemble DIR" >&2
	exit 2
	;;
esac
