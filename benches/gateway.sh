#!/usr/bin/env bash
# The egress gateway side by side with Squid (Debian package) as a CONNECT allowlist proxy, with
# HAProxy (Debian package) splicing as a plain TCP forwarder (one extra hop at its cheapest) and with
# direct loopback: throughput of one large transfer, tunnel setup latency p50/p99, and 1,000
# tunnels held open (errors, memory per idle tunnel). Prints figures, asserts nothing.
# Usage: benches/gateway.sh   (as root: the bench's DNS server takes 127.0.0.1:53, its upstream
# 127.0.0.77:443, in a network namespace of the bench's own where unshare(1) can make one; knobs BENCH_BYTES, BENCH_SEQUENTIAL, BENCH_CONCURRENT… pass through to
# gateway/benches/egress.rs, and so do extra proxies to compare, BENCH_PROXIES="NAME=IP:PORT@PID …";
# ROUNDTABLE_BIN measures another build of the gateway than this tree's release build;
# BENCH_CPUS and BENCH_PROXY_CPUS, taskset lists such as 0-1 and 2-3, give the bench's own client
# and upstream and every proxy CPUs of their own, so that on a machine with CPUs to spare a proxy's
# hop is measured without it taking turns with the bench's two ends).
# ROUNDTABLE_BENCH_SMOKE=1 (benches/lib.sh): tiny sizes on the debug build, and any error fails it.
# Everything listens on loopback only.
set -euo pipefail
cd "$(dirname "$0")/.."
source benches/lib.sh

if ! command -v squid >/dev/null || ! command -v haproxy >/dev/null; then
  apt-get update -q
  # policy-rc.d or no init keeps the packaged services from starting; ours are started below.
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q squid haproxy >/dev/null
fi
roundtable_bin
export ROUNDTABLE_BIN=$bin
egress=${BENCH_EGRESS:-$(rust_bench roundtable-gateway egress)}
# The bench's DNS server takes 127.0.0.1:53 (Squid asks no other port) and its upstream
# 127.0.0.77:443: in a network namespace of its own, with only its loopback, two runs at once (or
# a resolver of the host's) never fight for them. Packages and builds above used the host's.
if [ -z "${BENCH_NETNS:-}" ] && command -v unshare >/dev/null && unshare --net true 2>/dev/null; then
  export BENCH_EGRESS=$egress BENCH_NETNS=1
  exec unshare --net -- bash -c 'ip link set lo up && exec bash "$@"' bash "$PWD/benches/gateway.sh" "$@"
fi

# Squid drops root for the proxy user, which must reach its logs and pid file: /tmp may be
# root-only, /var/tmp is world-traversable.
work=$(mktemp -d /var/tmp/roundtable-squid.XXXXXX)
chown proxy:proxy "$work"
pin_bench=()
pin_proxy=()
if [[ -n ${BENCH_PROXY_CPUS:-} ]]; then
  pin_bench=(taskset -c "${BENCH_CPUS:?set BENCH_CPUS too, the CPUs of the bench itself}")
  pin_proxy=(taskset -c "$BENCH_PROXY_CPUS")
  # The bench starts the gateways and the relay itself, through this.
  printf '#!/bin/sh\nexec taskset -c %s %s "$@"\n' "$BENCH_PROXY_CPUS" "$ROUNDTABLE_BIN" >"$work/roundtable"
  chmod 0755 "$work/roundtable"
  ROUNDTABLE_BIN=$work/roundtable
fi
squid_pid=
haproxy_pid=
stop() { # PID SIGNAL
  if [[ -n $1 ]] && kill -0 "$1" 2>/dev/null; then
    kill "-$2" "$1" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$1" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$1" 2>/dev/null || true
  fi
}
cleanup() {
  stop "$squid_pid" INT
  stop "$haproxy_pid" TERM
  rm -rf "$work"
}
trap cleanup EXIT

listening() { ss -Hltn "sport = :$1" | grep -q .; }
port=31280
while listening "$port"; do port=$((port + 1)); done

# Squid 5 has no dns_v4_first (it was removed). It caches answers for at least negative_dns_ttl
# (1 s minimum) whatever their TTL, so it resolves about once per run; the gateway resolves once
# per tunnel by design: the bench prints DNS queries per tunnel beside the latency.
cat >"$work/squid.conf" <<EOF
http_port 127.0.0.1:$port
visible_hostname roundtable-bench
cache_effective_user proxy
dns_nameservers 127.0.0.1
hosts_file none
udp_incoming_address 127.0.0.1
udp_outgoing_address 127.0.0.1
acl allowed dstdomain bench.roundtable.test
acl SSL_ports port 443
http_access allow CONNECT allowed SSL_ports
http_access deny all
cache deny all
icp_port 0
htcp_port 0
pinger_enable off
netdb_filename none
max_filedescriptors 16384
shutdown_lifetime 1 seconds
access_log stdio:$work/access.log
cache_log $work/cache.log
pid_filename $work/squid.pid
coredump_dir $work
EOF
squid -k parse -f "$work/squid.conf" 2>"$work/parse.log" || { cat "$work/parse.log"; exit 1; }
${pin_proxy[@]+"${pin_proxy[@]}"} squid -N -f "$work/squid.conf" &
squid_pid=$!
for _ in $(seq 100); do listening "$port" && break; sleep 0.1; done
listening "$port" || { echo "squid did not listen on 127.0.0.1:$port" >&2; cat "$work/cache.log" >&2; exit 1; }

echo "squid: $(squid -v | head -n 1), pid $squid_pid, 127.0.0.1:$port, config $work/squid.conf"

# HAProxy forwards every connection to the upstream, splicing both ways with pipes as large as the
# gateway's: no CONNECT, no policy, no lookup. It shows what one extra hop costs a mature splicing
# proxy on this machine, the yardstick for the gateway's own hop beside the ideal of direct.
forward_port=$((port + 1))
while listening "$forward_port"; do forward_port=$((forward_port + 1)); done
cat >"$work/haproxy.cfg" <<EOF
global
    maxconn 4096
    tune.pipesize 1048576
defaults
    mode tcp
    timeout connect 5s
    timeout client 60s
    timeout server 60s
    option splice-request
    option splice-response
listen forward
    bind 127.0.0.1:$forward_port
    server upstream 127.0.0.77:443
EOF
haproxy -c -q -f "$work/haproxy.cfg"
${pin_proxy[@]+"${pin_proxy[@]}"} haproxy -db -f "$work/haproxy.cfg" &
haproxy_pid=$!
for _ in $(seq 100); do listening "$forward_port" && break; sleep 0.1; done
listening "$forward_port" || { echo "haproxy did not listen on 127.0.0.1:$forward_port" >&2; exit 1; }
echo "haproxy: $(haproxy -v | head -n 1 | cut -d' ' -f1-3), pid $haproxy_pid, 127.0.0.1:$forward_port, config $work/haproxy.cfg"

BENCH_PROXIES="squid=127.0.0.1:$port@$squid_pid ${BENCH_PROXIES:-}" \
  BENCH_FORWARDERS="haproxy-forward=127.0.0.1:$forward_port@$haproxy_pid ${BENCH_FORWARDERS:-}" \
  ${pin_bench[@]+"${pin_bench[@]}"} "$egress"
echo "squid access.log: $(wc -l <"$work/access.log") lines; $(awk '{print $4}' "$work/access.log" | sort | uniq -c | tr '\n' ' ')"
[ -s "$work/access.log" ] || fail_in_smoke "squid logged no request: the bench did not go through it"
