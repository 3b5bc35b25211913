#!/usr/bin/env bash
# Starts N `klspec serve` replicas on loopback ports and HAProxy (deploy/haproxy.cfg.in) in front of them, and
# stops them all cleanly on SIGINT or SIGTERM (HAProxy stops taking connections, the replicas drain, HAProxy
# finishes what is in flight). docs/deployment.md.
#
#   deploy/serve-balanced.sh [-n REPLICAS] [--port PORT] [--bind ADDR] [--replica-port FIRST] [--run-dir DIR]
#                            [--klspec BIN] [--check-inter MS] [-- KLSPEC_SERVE_FLAGS...]
#
# Defaults: 3 replicas, the balancer on 127.0.0.1:8080, the replicas on 127.0.0.1:18081.., the klspec of
# ./build (else `klspec` on PATH), replica flags `-np 4 -t 1` (whatever follows `--` replaces them; each
# replica also gets --host 127.0.0.1 --port P). The run directory (default: a new one under /tmp) holds
# haproxy.cfg, haproxy.log (one line per request), replica-I.log, replica-I.pid and haproxy.pid.
# When every replica answers /health 200 and the balancer is up, stdout gets one line:
#   serve-balanced: listening on http://127.0.0.1:8080 (3 replicas, run directory /tmp/...)
# Needs haproxy (scripts/setup-deps.sh installs Debian's).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

replicas=3 port=8080 bind=127.0.0.1 first_port=18081 run_dir="" check_inter=500
klspec="$root/build/klspec"
[[ -x "$klspec" ]] || klspec=$(command -v klspec || true)
serve_flags=(-np 4 -t 1)
while (($#)); do
  case "$1" in
    -n|--replicas) replicas=$2; shift 2 ;;
    --port) port=$2; shift 2 ;;
    --bind) bind=$2; shift 2 ;;
    --replica-port) first_port=$2; shift 2 ;;
    --run-dir) run_dir=$2; shift 2 ;;
    --klspec) klspec=$2; shift 2 ;;
    --check-inter) check_inter=$2; shift 2 ;;
    --) shift; serve_flags=("$@"); break ;;
    -h|--help) sed -n '2,16s/^# \{0,1\}//p' "$0"; exit 0 ;;
    *) echo "serve-balanced: unknown argument $1 (--help)" >&2; exit 1 ;;
  esac
done
command -v haproxy >/dev/null || { echo "serve-balanced: no haproxy (bash scripts/setup-deps.sh installs it)" >&2; exit 1; }
[[ -n "$klspec" && -x "$klspec" ]] || { echo "serve-balanced: no klspec binary (build it, or --klspec BIN)" >&2; exit 1; }
[[ "$replicas" =~ ^[1-9][0-9]*$ ]] || { echo "serve-balanced: -n wants a positive count" >&2; exit 1; }
[[ -n "$run_dir" ]] || run_dir=$(mktemp -d /tmp/klspec-balanced.XXXXXX)
mkdir -p "$run_dir"
run_dir=$(cd "$run_dir" && pwd)

servers_leastconn="" servers_session=""
for ((i = 0; i < replicas; ++i)); do
  servers_leastconn+="    server r$i 127.0.0.1:$((first_port + i))"$'\n'
  servers_session+="    server r$i 127.0.0.1:$((first_port + i)) track replicas/r$i"$'\n'
done
awk -v run_dir="$run_dir" -v bind="$bind" -v port="$port" -v inter="${check_inter}ms" \
    -v lc="$servers_leastconn" -v ss="$servers_session" '
  /^@SERVERS_LEASTCONN@$/ { printf "%s", lc; next }
  /^@SERVERS_SESSION@$/ { printf "%s", ss; next }
  { gsub(/@RUN_DIR@/, run_dir); gsub(/@BIND@/, bind); gsub(/@PORT@/, port);
    gsub(/@CHECK_INTER@/, inter); print }' "$root/deploy/haproxy.cfg.in" > "$run_dir/haproxy.cfg"
haproxy -c -q -f "$run_dir/haproxy.cfg"

pids=()
stopping=0
shutdown() {
  ((stopping)) && return
  stopping=1
  echo "serve-balanced: stopping (HAProxy stops accepting; the replicas drain)" >&2
  # SIGUSR1: HAProxy's soft stop, it closes its listener and ends once its connections are done. SIGTERM:
  # each replica answers 503 to new requests and finishes those in flight (--drain-timeout), then exits 0.
  [[ -f "$run_dir/haproxy.pid" ]] && kill -USR1 "$(cat "$run_dir/haproxy.pid")" 2>/dev/null || true
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  local status=0
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || status=$?; done
  # Whatever HAProxy still holds ended with the replicas; a second signal stops it if a client lingers.
  [[ -f "$run_dir/haproxy.pid" ]] && kill -TERM "$(cat "$run_dir/haproxy.pid")" 2>/dev/null || true
  wait 2>/dev/null || true
  echo "serve-balanced: stopped" >&2
  exit "$status"
}
trap shutdown INT TERM

for ((i = 0; i < replicas; ++i)); do
  "$klspec" serve --host 127.0.0.1 --port $((first_port + i)) "${serve_flags[@]}" \
      > "$run_dir/replica-$i.log" 2>&1 &
  pids+=($!)
  echo $! > "$run_dir/replica-$i.pid"
done
# -db: in the foreground of this script (its log on stderr), one process.
haproxy -db -f "$run_dir/haproxy.cfg" 2> "$run_dir/haproxy.log" &
pids+=($!)
echo $! > "$run_dir/haproxy.pid"

# GET PATH on HOST:PORT: the status code (000: no answer), from bash alone.
http_status() {
  local reply
  { exec 3<>"/dev/tcp/$1/$2"; } 2>/dev/null || { echo 000; return; }
  printf 'GET %s HTTP/1.0\r\nHost: localhost\r\n\r\n' "$3" >&3
  read -r -t 5 _ reply _ <&3 || reply=000
  exec 3>&-
  echo "${reply:-000}"
}
connect_host=$bind; [[ "$bind" == 0.0.0.0 || "$bind" == "*" ]] && connect_host=127.0.0.1
deadline=$((SECONDS + ${KLSPEC_BALANCED_START_TIMEOUT:-300}))
for ((i = 0; i < replicas; ++i)); do
  until [[ $(http_status 127.0.0.1 $((first_port + i)) /health) == 200 ]]; do
    kill -0 "${pids[i]}" 2>/dev/null || { echo "serve-balanced: replica $i exited (see $run_dir/replica-$i.log)" >&2; tail -n 3 "$run_dir/replica-$i.log" >&2; shutdown; }
    ((SECONDS < deadline)) || { echo "serve-balanced: replica $i not ready in time" >&2; shutdown; }
    sleep 0.2
  done
done
until [[ $(http_status "$connect_host" "$port" /lb/health) == 200 ]]; do
  kill -0 "${pids[-1]}" 2>/dev/null || { echo "serve-balanced: haproxy exited (see $run_dir/haproxy.log)" >&2; shutdown; }
  ((SECONDS < deadline)) || { echo "serve-balanced: the balancer not ready in time" >&2; shutdown; }
  sleep 0.2
done
# And until HAProxy's own checks see every replica up (its `show stat` on the stats socket).
all_up() {
  python3 - "$run_dir/haproxy.sock" "$replicas" <<'PY'
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall(b"show stat\n")
data = b""
while chunk := s.recv(65536):
    data += chunk
rows = [l.split(",") for l in data.decode().splitlines() if l and not l.startswith("#")]
up = sum(r[0] == "replicas" and r[1] not in ("FRONTEND", "BACKEND") and r[17] == "UP" for r in rows)
sys.exit(0 if up == int(sys.argv[2]) else 1)
PY
}
until all_up; do
  ((SECONDS < deadline)) || { echo "serve-balanced: HAProxy does not see every replica up" >&2; shutdown; }
  sleep 0.2
done
echo "serve-balanced: listening on http://$connect_host:$port ($replicas replicas, run directory $run_dir)"

# Until a signal (the trap stops everything), or until HAProxy exits. A replica that dies stays down: HAProxy
# routes around it.
wait "${pids[-1]}" || true
echo "serve-balanced: haproxy exited (see $run_dir/haproxy.log)" >&2
shutdown
