#!/usr/bin/env python3
"""Enrol in a leader election, then print every change of leader as it happens.

    follow_election.py ELECTION [ID]

Prints "enrolled ID leader true|false term T", then one line per change of
leader, the current one first: "leader CANDIDATE term T" ("leader none" while
there is none). Stops after $EVENTS leader lines or $TIMEOUT seconds (0, the
default for both: no limit), or on Ctrl-C. Leaving closes the lease's stream,
which ends the candidacy at once: the next candidate leads.

A restart of the sidecar (kill -USR2, or kill -9 and a successor on the same
--state-dir) ends its streams: they are opened again (with Last-Event-ID),
after 50 ms doubling to 1 s, and the candidacy goes on. The program exits 1
when the sidecar says the lease is gone (404, or its stream's last event), or
when the sidecar cannot be reached for TTL seconds (the lease expired then).

Environment: COORD_ADDR (default http://127.0.0.1:8080), VALUE (published with
the candidate; default the host name), TTL (seconds, default 10), EVENTS,
TIMEOUT. Python 3 standard library only.
"""
import http.client
import json
import os
import re
import signal
import socket
import sys
import threading
import time
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
    sys.exit(f"follow_election.py: COORD_ADDR={addr}: want http://HOST:PORT, https://HOST:PORT, HOST:PORT or unix:/PATH")


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


def call(method, path, body=None):
    """Sends one request (body as JSON) and returns the decoded JSON answer.
    An HTTP error raises RuntimeError with the problem document."""
    req = urllib.request.Request(ADDR + path, method=method, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req) as resp:
            return json.load(resp)
    except urllib.error.HTTPError as e:
        raise RuntimeError(f"{method} {path}: {e.code} {e.read().decode()}") from None


def parse(resp):
    """Yields (id, event, data) for each server-sent event of a response."""
    ev_id, event, data = "", "", []
    for raw in resp:
        line = raw.decode().rstrip("\r\n")
        if line.startswith("id:"):
            ev_id = line[3:].strip()
        elif line.startswith("event:"):
            event = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))
        elif not line:  # a blank line ends an event; ":" lines are comments
            if data:
                yield ev_id, event, json.loads("\n".join(data))
            event, data = "", []


def events(path, give_up=None):
    """Yields (event, data) for each server-sent event of the stream at path,
    for good: a stream that ends or breaks (the sidecar restarting) is opened
    again, with Last-Event-ID, after 50 ms doubling to 1 s, and its first
    events are the state now. An answer that is not a restart's (404: the
    lease or what path names is gone) raises RuntimeError; so does a sidecar
    not reached for give_up seconds (None: tried for ever)."""
    last_id, pause, broke = None, 0.05, None
    while True:
        headers = {"Last-Event-ID": last_id} if last_id else {}
        try:
            with urllib.request.urlopen(urllib.request.Request(ADDR + path, headers=headers)) as resp:
                pause, broke = 0.05, None
                for ev_id, event, data in parse(resp):
                    last_id = ev_id or last_id
                    yield event, data
        except urllib.error.HTTPError as e:
            if e.code < 500 and e.code != 429:
                raise RuntimeError(f"GET {path}: {e.code} {e.read().decode()}") from None
        except (OSError, http.client.HTTPException):
            pass  # refused, reset, cut short: the sidecar is restarting
        broke = broke or time.monotonic()
        if give_up is not None and time.monotonic() - broke > give_up:
            raise RuntimeError(f"GET {path}: the sidecar was not reached for {give_up}s")
        time.sleep(pause)
        pause = min(pause * 2, 1.0)


def hold_lease(lease, ttl):
    """Keeps the lease alive by holding its event stream open: the lease does not
    expire while the stream is open, and is revoked when it closes (when this
    process exits). The stream's last event says how the lease ended; after a
    restart of the sidecar the stream is opened again (see events) unless the
    lease is gone, or TTL passed without reaching the sidecar."""
    last = None
    try:
        for last, _ in events(f"/v1/leases/{lease}/events", give_up=ttl):
            if last in ("lost", "expired", "revoked"):
                break
    except RuntimeError as e:
        last = e
    print(f"follow_election.py: the lease ended ({last})", file=sys.stderr)
    os._exit(1)


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    election = sys.argv[1]
    me = sys.argv[2] if len(sys.argv) > 2 else f"candidate-{os.getpid()}"
    max_events = int(os.environ.get("EVENTS", "0"))
    # TIMEOUT: SIGALRM ends the program (alarm(0) sets no alarm).
    signal.signal(signal.SIGALRM, lambda *_: sys.exit(0))
    signal.alarm(int(os.environ.get("TIMEOUT", "0")))

    # 1. Enrol. The answer (201) is {"candidate","leader","lease","name","term"}.
    ttl = int(os.environ.get("TTL", "10"))
    query = urllib.parse.urlencode({"id": me, "ttl": f"{ttl}s"})
    value = os.environ.get("VALUE", socket.gethostname())
    try:
        c = call("POST", f"/v1/elections/{election}/candidates?{query}", {"value": value})
    except RuntimeError as e:
        sys.exit(f"follow_election.py: could not enrol: {e}")
    print(f"enrolled {me} leader {str(c['leader']).lower()} term {c['term']}", flush=True)

    # 2. Keep the candidacy's lease alive (see hold_lease).
    threading.Thread(target=hold_lease, args=(c["lease"], ttl), daemon=True).start()

    # 3. Follow the election: one `leader` event (data: the election, as GET
    #    /v1/elections/ELECTION answers it) now, then one on every change; after
    #    a restart of the sidecar, the state now again (printed if it changed).
    last, printed = None, 0
    for _, e in events(f"/v1/elections/{election}/events"):
        leader = e["leader"]  # {"candidate","since","term","value"} or None
        now = f"leader {leader['candidate']} term {leader['term']}" if leader else "leader none"
        if now == last:
            continue  # only the line of candidates changed
        print(now, flush=True)
        last, printed = now, printed + 1
        if printed == max_events:
            return


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit(130)
    except RuntimeError as e:  # the election's stream refused
        sys.exit(f"follow_election.py: {e}")
    except OSError as e:  # the sidecar cannot be reached
        sys.exit(f"follow_election.py: {e}")
