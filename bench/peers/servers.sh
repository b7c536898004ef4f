#!/usr/bin/env bash
# servers.sh start|stop|check: the coordination servers bench/peers compares
# dblock with, each a single node on loopback on ports of its own, data on
# local disk under $PEERS_SERVERS_DIR (default ~/.cache/dblock-peers-servers):
#
#   etcd       127.0.0.1:12379 (peer 12380)  WAL fsynced before each commit (etcd's default)
#   Redis      127.0.0.1:16379               appendonly yes, appendfsync always (fsync before each reply)
#   Redis      127.0.0.1:16380               appendonly yes, appendfsync everysec (up to ~1 s lost on a crash)
#   ZooKeeper  127.0.0.1:12181               forceSync=yes (ZooKeeper's default), tickTime=2000 (its default)
#
# start installs what is missing from the Debian packages (etcd-server,
# redis-server, zookeeper: apt-get, as root), starts each server that is not
# already running from this directory, waits until each answers, and fails
# if any cannot be had. stop kills only the processes named in the pid files
# start wrote, and removes their data. check exits non-zero unless all four
# answer. It never touches a server it did not start (a Redis on 6379, say).
set -euo pipefail

dir=${PEERS_SERVERS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/dblock-peers-servers}

install_missing() {
	local pkgs=()
	command -v etcd >/dev/null || pkgs+=(etcd-server)
	command -v redis-server >/dev/null || pkgs+=(redis-server)
	[ -f /usr/share/java/zookeeper.jar ] || pkgs+=(zookeeper)
	command -v java >/dev/null || pkgs+=(default-jre-headless)
	[ ${#pkgs[@]} -eq 0 ] && return 0
	if [ "$(id -u)" -ne 0 ]; then
		echo "servers.sh: missing ${pkgs[*]} and not root to install them" >&2
		return 1
	fi
	echo "servers.sh: apt-get install ${pkgs[*]}" >&2
	DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${pkgs[@]}" >&2 ||
		{ apt-get update >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${pkgs[@]}" >&2; }
}

# alive NAME: the process in NAME's pid file runs.
alive() {
	local f="$dir/$1.pid"
	[ -f "$f" ] && kill -0 "$(cat "$f")" 2>/dev/null
}

# port_open PORT
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# free PORT NAME: fail if PORT is taken by something else.
free() {
	if port_open "$1"; then
		echo "servers.sh: port $1 for $2 is taken by a process this script did not start" >&2
		return 1
	fi
}

start_etcd() {
	alive etcd && return 0
	free 12379 etcd && free 12380 etcd
	mkdir -p "$dir/etcd"
	etcd --name peers --data-dir "$dir/etcd/data" \
		--listen-client-urls http://127.0.0.1:12379 --advertise-client-urls http://127.0.0.1:12379 \
		--listen-peer-urls http://127.0.0.1:12380 --initial-advertise-peer-urls http://127.0.0.1:12380 \
		--initial-cluster peers=http://127.0.0.1:12380 --initial-cluster-state new \
		--log-level warn >"$dir/etcd/log" 2>&1 </dev/null &
	echo $! >"$dir/etcd.pid"
}

# start_redis NAME PORT FSYNC
start_redis() {
	alive "$1" && return 0
	free "$2" "$1"
	mkdir -p "$dir/$1"
	redis-server --port "$2" --bind 127.0.0.1 --dir "$dir/$1" --appendonly yes --appendfsync "$3" \
		--save '' --daemonize no --logfile "$dir/$1/log" --protected-mode yes </dev/null >/dev/null 2>&1 &
	echo $! >"$dir/$1.pid"
}

start_zookeeper() {
	alive zookeeper && return 0
	free 12181 zookeeper
	mkdir -p "$dir/zookeeper/data"
	cat >"$dir/zookeeper/zoo.cfg" <<EOF
tickTime=2000
dataDir=$dir/zookeeper/data
clientPort=12181
clientPortAddress=127.0.0.1
forceSync=yes
maxSessionTimeout=60000
admin.enableServer=false
4lw.commands.whitelist=ruok
EOF
	java -Xmx256m -Dzookeeper.log.dir="$dir/zookeeper" -cp "/etc/zookeeper/conf:/usr/share/java/zookeeper.jar" \
		org.apache.zookeeper.server.ZooKeeperServerMain "$dir/zookeeper/zoo.cfg" \
		>"$dir/zookeeper/log" 2>&1 </dev/null &
	echo $! >"$dir/zookeeper.pid"
}

check() {
	local bad=0
	etcdctl_ok || { echo "servers.sh: etcd on 12379 does not answer" >&2; bad=1; }
	for p in 16379 16380; do
		[ "$(redis-cli -p "$p" ping 2>/dev/null)" = PONG ] || { echo "servers.sh: redis on $p does not answer" >&2; bad=1; }
	done
	zk_ok || { echo "servers.sh: zookeeper on 12181 does not answer" >&2; bad=1; }
	return $bad
}

etcdctl_ok() {
	local out
	out=$( (exec 3<>/dev/tcp/127.0.0.1/12379 && printf 'GET /health HTTP/1.0\r\n\r\n' >&3 && cat <&3) 2>/dev/null) || return 1
	[[ $out == *'"health":"true"'* ]]
}

zk_ok() {
	local out
	out=$( (exec 3<>/dev/tcp/127.0.0.1/12181 && printf ruok >&3 && timeout 2 cat <&3) 2>/dev/null) || return 1
	[ "$out" = imok ]
}

stop() {
	for name in etcd redis-always redis-everysec zookeeper; do
		local f="$dir/$name.pid"
		[ -f "$f" ] || continue
		local pid
		pid=$(cat "$f")
		if kill -0 "$pid" 2>/dev/null; then
			kill "$pid" 2>/dev/null || true
			for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
			kill -9 "$pid" 2>/dev/null || true
		fi
		rm -f "$f"
		rm -rf "${dir:?}/$name"
	done
}

case ${1:-} in
start)
	install_missing
	mkdir -p "$dir"
	start_etcd
	start_redis redis-always 16379 always
	start_redis redis-everysec 16380 everysec
	start_zookeeper
	for _ in $(seq 150); do
		check 2>/dev/null && exit 0
		sleep 0.2
	done
	check || { echo "servers.sh: logs under $dir" >&2; exit 1; }
	;;
stop) stop ;;
check) check ;;
*)
	echo "usage: $0 start|stop|check" >&2
	exit 2
	;;
esac
