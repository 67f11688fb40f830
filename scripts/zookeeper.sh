#!/usr/bin/env bash
# Local standalone ZooKeeper for development and CI (Debian/Ubuntu).
#
#   scripts/zookeeper.sh install             install Debian's zookeeper package if missing
#   scripts/zookeeper.sh start [DIR] [PORT]  start a server on 127.0.0.1:PORT (default .zk, 2181)
#   scripts/zookeeper.sh stop [DIR]          stop the server started by "start" in DIR
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

start_zk() {
	local dir="${1:-$ROOT/.zk}" port="${2:-2181}"
	if [ "$(fourletter "$port" ruok)" = imok ]; then
		echo "zookeeper.sh: a server already answers on 127.0.0.1:$port; reusing it"
		return 0
	fi
	install_zk
	stop_zk "$dir" >/dev/null # a stale server of ours that does not answer
	mkdir -p "$dir/data"
	dir="$(cd "$dir" && pwd)"
	cat >"$dir/zoo.cfg" <<CFG
tickTime=2000
dataDir=$dir/data
clientPort=$port
clientPortAddress=127.0.0.1
admin.enableServer=false
4lw.commands.whitelist=*
CFG
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
	local deadline=$((SECONDS + 60)) pid=""
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
	stop_zk "$dir" >/dev/null
	exit 1
}

case "${1:-}" in
install) install_zk ;;
start) start_zk "${2:-}" "${3:-}" ;;
stop) stop_zk "${2:-}" ;;
*)
	echo "usage: $0 install | start [DIR] [PORT] | stop [DIR]" >&2
	exit 2
	;;
esac
