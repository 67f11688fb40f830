#!/usr/bin/env python3
"""Run a command while holding a coord-sidecar lock, with the lock's fencing token.

    lock.py LOCK [COMMAND [ARG]...]

Takes LOCK (waiting up to $WAIT for it), prints "token N", runs COMMAND with
FENCING_TOKEN=N in its environment while keeping the lock's lease alive, then
releases the lock and prints "released". Exits with COMMAND's status, or 1 when
the lock could not be taken. Without COMMAND it prints a line and sleeps 2s.

A restart of the sidecar (kill -USR2, or kill -9 and a successor on the same
--state-dir) costs nothing: a keepalive that finds the sidecar away is tried
again after 50 ms doubling to 1 s. COMMAND is stopped only when the sidecar
says the lease is gone (404), or when no keepalive was answered for as long as
the lease could outlive it: TTL, or half the sidecar's ZooKeeper session
timeout (a sidecar gone for good lets its session, and the lock, expire then).

Environment: COORD_ADDR (default http://127.0.0.1:8080), WAIT (10s), TTL (the
lease's time to live in seconds, at least 3; default 30), OWNER (shown as the
lock's holder; default host:pid). Python 3 standard library only, and coord.py
beside it (the address, one call).
"""
import http.client
import os
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

from coord import ADDR, call


def answer(method, path):
    """Sends one request: (status, None) for an answer, (None, error) when the
    sidecar could not be reached or did not answer in time."""
    try:
        with urllib.request.urlopen(urllib.request.Request(ADDR + path, method=method), timeout=5) as resp:
            return resp.status, None
    except urllib.error.HTTPError as e:
        return e.code, None
    except (OSError, http.client.HTTPException) as e:
        return None, e


def vouched(ttl):
    """How long an answered keepalive vouches for the lease: TTL, or half the
    sidecar's ZooKeeper session timeout if that is shorter."""
    timeout = call("GET", "/v1/session").get("timeout", "")  # a Go duration: "10s", "1m30s"
    units = {"h": 3600, "m": 60, "s": 1, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}
    seconds = sum(float(n) * units[u] for n, u in re.findall(r"(\d+(?:\.\d+)?)(h|ms|m|s|us|µs|ns)", timeout))
    return min(ttl, seconds / 2) if seconds > 0 else ttl


def keep_alive(lease, period, work, stop):
    """Keeps the lease alive, three keepalives per period, until stop is set. A
    keepalive the sidecar does not answer (restarting: refused, cut, 5xx) is
    tried again after 50 ms doubling to 1 s. The work is stopped when the sidecar
    answers that the lease is gone, or when no keepalive was answered for period
    since the last answered one was sent (the lease may have expired then)."""
    confirmed, backoff = time.monotonic(), None  # backoff: after a keepalive not answered
    while True:
        left = confirmed + period - time.monotonic()
        if left <= 0:
            why = f"no keepalive answered for {period:g}s"
            break
        if stop.wait(min(period / 3 if backoff is None else backoff, left)):
            return
        sent = time.monotonic()
        status, _ = answer("POST", f"/v1/leases/{lease}/keepalive")
        if status == 200:
            confirmed, backoff = sent, None
        elif status is not None and status < 500 and status != 429:
            why = f"keepalive answered {status}"
            break
        else:
            backoff = 0.05 if backoff is None else min(backoff * 2, 1.0)
    print(f"lock.py: lease lost ({why}); stopping the work", file=sys.stderr)
    work.terminate()


def release(lock, lease):
    """Releases the lock; tried again for up to 10 s while the sidecar restarts."""
    pause, deadline = 0.05, time.monotonic() + 10
    while True:
        status, _ = answer("DELETE", f"/v1/locks/{lock}?lease={lease}")
        if status is not None and status < 500 and status != 429 or time.monotonic() > deadline:
            return
        time.sleep(pause)
        pause = min(pause * 2, 1.0)


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    lock = sys.argv[1]
    command = sys.argv[2:] or ["sh", "-c", 'echo "working with fencing token $FENCING_TOKEN"; sleep 2']
    ttl = int(os.environ.get("TTL", "30"))
    period = vouched(ttl)  # how long an answered keepalive vouches for the lease

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
        #    Meanwhile keep the lease alive (see keep_alive).
        work = subprocess.Popen(command, env={**os.environ, "FENCING_TOKEN": str(token)})
        threading.Thread(target=keep_alive, args=(lease, period, work, stop), daemon=True).start()
        status = work.wait()
    finally:
        # 3. Release (also after Ctrl-C): the implicit lease ends with it.
        stop.set()
        release(lock, lease)
        print("released", flush=True)
    return status if status >= 0 else 128 - status  # -N: killed by signal N

if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:  # Ctrl-C: the lock was released on the way out
        sys.exit(130)
    except (RuntimeError, OSError) as e:  # a failed call or command
        sys.exit(f"lock.py: {e}")
