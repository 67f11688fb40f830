#!/usr/bin/env python3
"""Run a command while holding a coord-sidecar lock, with the lock's fencing token.

    lock.py LOCK [COMMAND [ARG]...]

Takes LOCK (waiting up to $WAIT for it), prints "token N", runs COMMAND with
FENCING_TOKEN=N in its environment while keeping the lock's lease alive, then
releases the lock and prints "released". Exits with COMMAND's status, or 1 when
the lock could not be taken. Without COMMAND it prints a line and sleeps 2s.

Environment: COORD_ADDR (default http://127.0.0.1:8080), WAIT (10s), TTL (the
lease's time to live in seconds, at least 3; default 30), OWNER (shown as the
lock's holder; default host:pid). Python 3 standard library only.
"""
import http.client
import json
import os
import re
import socket
import subprocess
import sys
import threading
import urllib.error
import urllib.parse
import urllib.request


def sidecar(addr):
    """Reads COORD_ADDR: a URL (http://HOST:PORT, https://HOST:PORT), HOST:PORT
    (plain http) or unix:/PATH (a unix socket). Returns the URL that request
    paths follow and the socket's path (None over TCP)."""
    if addr.startswith("unix:"):
        path = addr[len("unix:"):].removeprefix("//")  # also unix:///run/coord.sock
        if path:
            return "http://localhost", path
    elif addr.startswith(("http://", "https://")):
        if urllib.parse.urlsplit(addr).hostname:
            return addr.rstrip("/"), None
    elif re.fullmatch(r"[^/?#:]*:\d+|\[[0-9a-fA-F:.]+\]:\d+", addr):
        return "http://" + ("127.0.0.1" + addr if addr.startswith(":") else addr), None
    sys.exit(f"lock.py: COORD_ADDR={addr}: want http://HOST:PORT, https://HOST:PORT, HOST:PORT or unix:/PATH")


class UnixHTTPConnection(http.client.HTTPConnection):
    """HTTP to http://localhost over the unix socket SOCKET."""

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(SOCKET)


class UnixHTTPHandler(urllib.request.HTTPHandler):
    def http_open(self, req):
        return self.do_open(UnixHTTPConnection, req)


ADDR, SOCKET = sidecar(os.environ.get("COORD_ADDR") or "http://127.0.0.1:8080")
if SOCKET:  # every urlopen below goes through the socket (and no proxy)
    urllib.request.install_opener(urllib.request.build_opener(UnixHTTPHandler, urllib.request.ProxyHandler({})))


def call(method, path):
    """Sends one request and returns the decoded JSON answer (None when empty).
    An HTTP error raises RuntimeError with the problem document."""
    try:
        with urllib.request.urlopen(urllib.request.Request(ADDR + path, method=method)) as resp:
            raw = resp.read()
    except urllib.error.HTTPError as e:
        raise RuntimeError(f"{method} {path}: {e.code} {e.read().decode()}") from None
    return json.loads(raw) if raw else None


def keep_alive(lease, every, work, stop):
    """Keeps the lease alive until stop is set; if that fails, the lock is no
    longer ours: stop the work."""
    while not stop.wait(every):
        try:
            call("POST", f"/v1/leases/{lease}/keepalive")
        except (RuntimeError, OSError) as e:
            print(f"lock.py: lease lost ({e}); stopping the work", file=sys.stderr)
            work.terminate()
            return


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    lock = sys.argv[1]
    command = sys.argv[2:] or ["sh", "-c", 'echo "working with fencing token $FENCING_TOKEN"; sleep 2']
    ttl = int(os.environ.get("TTL", "30"))

    # 1. Acquire. Without lease= the sidecar makes an implicit lease from ttl=,
    #    which ends with the release. The answer (201) is
    #    {"acquiredAt","fencingToken","lease","name","owner"}; a refusal is a
    #    problem document (409 lock-held after WAIT, for one).
    query = urllib.parse.urlencode({
        "wait": os.environ.get("WAIT", "10s"),
        "ttl": f"{ttl}s",
        "owner": os.environ.get("OWNER", f"{socket.gethostname()}:{os.getpid()}"),
    })
    try:
        grant = call("POST", f"/v1/locks/{lock}?{query}")
    except RuntimeError as e:
        sys.exit(f"lock.py: could not take {lock}: {e}")
    lease, token = grant["lease"], grant["fencingToken"]
    print(f"token {token}", flush=True)

    stop = threading.Event()
    try:
        # 2. Work, with the token in the environment: pass it to whatever the lock
        #    protects, which refuses tokens lower than the highest it has seen.
        #    Meanwhile keep the lease alive every TTL/3 seconds.
        work = subprocess.Popen(command, env={**os.environ, "FENCING_TOKEN": str(token)})
        threading.Thread(target=keep_alive, args=(lease, ttl / 3, work, stop), daemon=True).start()
        status = work.wait()
    finally:
        # 3. Release (also after Ctrl-C): the implicit lease ends with it.
        stop.set()
        call("DELETE", f"/v1/locks/{lock}?lease={lease}")
        print("released", flush=True)
    return status if status >= 0 else 128 - status  # -N: killed by signal N

if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:  # Ctrl-C: the lock was released on the way out
        sys.exit(130)
    except (RuntimeError, OSError) as e:  # a failed call or command
        sys.exit(f"lock.py: {e}")
