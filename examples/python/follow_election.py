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
TIMEOUT. Python 3 standard library only, and coord.py beside it (the address,
one call, the lease's stream and the election's, followed through restarts).
"""
import os
import signal
import socket
import sys
import threading
import urllib.parse

from coord import call, events, hold_lease


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
