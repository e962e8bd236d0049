#!/usr/bin/env bash
# Pre-authentication limits of the HTTP API, from loopback; prints, asserts nothing.
#   A daemon with --api-listen 127.0.0.1:0 and an empty project; its RSS idle, then while N
#   connections without the token (default 200, from 127.0.0.2) each POST an operator route with
#   `Content-Length: 1048576` and the body one byte short, and how long an operator's request with
#   the token (from 127.0.0.1) takes meanwhile; how many flood connections the daemon still holds
#   open after 5 s.
# Usage: benches/preauth.sh [N]   (ROUNDTABLE_BIN=PATH measures that binary instead of building;
#   ROUNDTABLE_BENCH_SMOKE=1, benches/lib.sh: 10 connections, the debug build, and an operator's
#   request without an answer fails it)
set -euo pipefail
cd "$(dirname "$0")/.."
source benches/lib.sh
flood=${1:-$(sized 200 10)}
roundtable_bin
source benches/daemon.sh
start_daemon "$bin"
sleep 2
echo "binary: $bin"
python3 - "$address" "$token" "$flood" "$daemon" "$smoke" <<'PY'
import socket, sys, threading, time
address, token, flood, pid = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
smoke = sys.argv[5] == "1"
host, port = address.rsplit(":", 1); port = int(port)

def rss_kib(field="VmRSS"):
    with open(f"/proc/{pid}/status") as f:
        return int(next(l for l in f if l.startswith(field + ":")).split()[1])

head = b"POST /v1/reconcile/Adapter/x HTTP/1.1\r\nHost: x\r\nContent-Length: 1048576\r\n\r\n"
body = b"x" * (1048576 - 1)
held = []
lock = threading.Lock()

def one():
    s = socket.socket()
    s.bind(("127.0.0.2", 0))
    s.settimeout(10)
    try:
        s.connect((host, port))
        s.sendall(head)
        s.sendall(body)
    except OSError:
        pass  # closed or reset by the daemon
    with lock:
        held.append(s)

def operator():
    s = socket.create_connection((host, port), timeout=60, source_address=("127.0.0.1", 0))
    started = time.monotonic()
    s.sendall(f"GET /v1/status HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n".encode())
    answer = b""
    try:
        while chunk := s.recv(65536):
            answer += chunk
    except OSError as error:
        if smoke:
            sys.exit(f"the operator's GET /v1/status had no answer ({error})")
        return f"no answer ({error}) after {time.monotonic() - started:.2f} s"
    status = answer.split(b"\r\n", 1)[0].decode(errors="replace")
    if smoke and not status.startswith("HTTP/1.1 200"):
        sys.exit(f"the operator's GET /v1/status was answered {status!r}")
    return f"{status!r} after {time.monotonic() - started:.3f} s"

idle = rss_kib()
threads = [threading.Thread(target=one) for _ in range(flood)]
for t in threads: t.start()
for t in threads: t.join()
time.sleep(1)
during = rss_kib()
print(f"flood: {flood} connections without the token, each 1 MiB declared, 1 MiB - 1 sent")
print(f"daemon RSS idle:         {idle / 1024:8.1f} MiB")
print(f"daemon RSS 1 s later:    {during / 1024:8.1f} MiB  (+{(during - idle) / 1024:.1f} MiB)")
print(f"operator GET /v1/status: {operator()}")
time.sleep(5)
open_, answered = 0, 0
for s in held:
    s.setblocking(False)
    data = b""
    try:
        while chunk := s.recv(65536):
            data += chunk
    except BlockingIOError:
        open_ += 1  # no end of stream yet: the daemon still holds it
    except OSError:
        pass  # reset
    answered += data.startswith(b"HTTP/1.1 401")
print(f"flood connections answered 401: {answered}; still held open 5 s later: {open_} of {flood}")
after = rss_kib()
print(f"daemon RSS 5 s later:    {after / 1024:8.1f} MiB  (+{(after - idle) / 1024:.1f} MiB; peak {rss_kib('VmHWM') / 1024:.1f} MiB)")
for s in held: s.close()
PY
