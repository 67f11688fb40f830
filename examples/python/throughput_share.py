#!/usr/bin/env python3
"""Join a throughput group, then print this member's share whenever it changes.

    throughput_share.py GROUP [ID]

Prints "joined ID", then "share S version V": first the share the join answered,
then one line each time the group's allocation gives this member another share.
Stops after $EVENTS share lines or $TIMEOUT seconds (0, the default for both: no
limit), or on Ctrl-C. Leaving closes the lease's stream, which ends the
membership at once: the others share the limit.

Environment: COORD_ADDR (default http://127.0.0.1:8080), WEIGHT (default 1), TTL
(seconds, default 10), EVENTS, TIMEOUT. Python 3 standard library only.
"""
import http.client
import json
import os
import re
import signal
import socket
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
    sys.exit(f"throughput_share.py: COORD_ADDR={addr}: want http://HOST:PORT, https://HOST:PORT, HOST:PORT or unix:/PATH")


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
    """Sends one request and returns the decoded JSON answer.
    An HTTP error raises RuntimeError with the problem document."""
    try:
        with urllib.request.urlopen(urllib.request.Request(ADDR + path, method=method)) as resp:
            return json.load(resp)
    except urllib.error.HTTPError as e:
        raise RuntimeError(f"{method} {path}: {e.code} {e.read().decode()}") from None


def events(path):
    """Yields (event, data) for each server-sent event of the stream at path."""
    with urllib.request.urlopen(ADDR + path) as resp:
        event, data = "", []
        for raw in resp:
            line = raw.decode().rstrip("\r\n")
            if line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].removeprefix(" "))
            elif not line:  # a blank line ends an event; ":" lines are comments
                if data:
                    yield event, json.loads("\n".join(data))
                event, data = "", []


def hold_lease(lease):
    """Keeps the lease alive by holding its event stream open: the lease does not
    expire while the stream is open, and is revoked when it closes (when this
    process exits). The stream's last event says how the lease ended."""
    last = None
    for last, _ in events(f"/v1/leases/{lease}/events"):
        pass
    print(f"throughput_share.py: the lease ended ({last})", file=sys.stderr)
    os._exit(1)


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    group = sys.argv[1]
    me = sys.argv[2] if len(sys.argv) > 2 else f"member-{os.getpid()}"
    max_events = int(os.environ.get("EVENTS", "0"))
    # TIMEOUT: SIGALRM ends the program (alarm(0) sets no alarm).
    signal.signal(signal.SIGALRM, lambda *_: sys.exit(0))
    signal.alarm(int(os.environ.get("TIMEOUT", "0")))

    # 1. Join. The answer (201) is {"group","id","lease","share","version"}.
    query = urllib.parse.urlencode({"id": me, "weight": os.environ.get("WEIGHT", "1"),
                                    "ttl": os.environ.get("TTL", "10") + "s"})
    try:
        joined = call("POST", f"/v1/throughput/{group}/members?{query}")
    except RuntimeError as e:
        sys.exit(f"throughput_share.py: could not join: {e}")
    share, version = joined["share"], joined["version"]
    print(f"joined {me}\nshare {share} version {version}", flush=True)
    printed = 1
    if printed == max_events:
        return

    # 2. Keep the membership's lease alive (see hold_lease).
    threading.Thread(target=hold_lease, args=(joined["lease"],), daemon=True).start()

    # 3. Follow the group: `throughput` events (data: the group, as GET
    #    /v1/throughput/GROUP answers it), the current allocation first, then every
    #    new one; `leader` events (a new computing member) do not matter here.
    for event, g in events(f"/v1/throughput/{group}/events"):
        if event != "throughput" or g["version"] < joined["version"]:
            continue
        mine = [m["share"] for m in g["members"] if m["id"] == me]
        if not mine:
            sys.exit(f"throughput_share.py: {me} is no longer a member of {group} (its lease ended?)")
        if mine[0] != share:
            share = mine[0]
            print(f"share {share} version {g['version']}", flush=True)
            printed += 1
            if printed == max_events:
                return
    sys.exit("throughput_share.py: the event stream ended")


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit(130)
    except OSError as e:  # the sidecar cannot be reached
        sys.exit(f"throughput_share.py: {e}")
