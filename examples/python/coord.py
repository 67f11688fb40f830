"""What the Python examples share: the sidecar's address, one call, and an event
stream followed through restarts of the sidecar. Imported by lock.py,
follow_election.py and throughput_share.py from their own folder (copy it with
them). Python 3 standard library only.

COORD_ADDR (default http://127.0.0.1:8080) is read on import; an address in no
form below ends the program (exit 1) with a message naming the forms.
"""
import http.client
import json
import os
import re
import socket
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

PROG = os.path.basename(sys.argv[0])  # the program's name, for its messages


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
    sys.exit(f"{PROG}: COORD_ADDR={addr}: want http://HOST:PORT, https://HOST:PORT, HOST:PORT or unix:/PATH")


class UnixHTTPConnection(http.client.HTTPConnection):
    """HTTP to http://localhost over the unix socket SOCKET."""

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(SOCKET)


class UnixHTTPHandler(urllib.request.HTTPHandler):
    def http_open(self, req):
        return self.do_open(UnixHTTPConnection, req)


ADDR, SOCKET = sidecar(os.environ.get("COORD_ADDR") or "http://127.0.0.1:8080")
if SOCKET:  # every urlopen goes through the socket (and no proxy)
    urllib.request.install_opener(urllib.request.build_opener(UnixHTTPHandler, urllib.request.ProxyHandler({})))


def call(method, path, body=None):
    """Sends one request (body, when given, as JSON) and returns the decoded
    JSON answer (None when empty). An HTTP error raises RuntimeError with the
    problem document."""
    req = urllib.request.Request(ADDR + path, method=method)
    if body is not None:
        req.data = json.dumps(body).encode()
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req) as resp:
            raw = resp.read()
    except urllib.error.HTTPError as e:
        raise RuntimeError(f"{method} {path}: {e.code} {e.read().decode()}") from None
    return json.loads(raw) if raw else None


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
    lease is gone, or TTL passed without reaching the sidecar. When the lease
    ends it says so and ends the process (exit 1)."""
    last = None
    try:
        for last, _ in events(f"/v1/leases/{lease}/events", give_up=ttl):
            if last in ("lost", "expired", "revoked"):
                break
    except RuntimeError as e:
        last = e
    print(f"{PROG}: the lease ended ({last})", file=sys.stderr)
    os._exit(1)
