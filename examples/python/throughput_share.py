#!/usr/bin/env python3
"""Join a throughput group, then print this member's share whenever it changes.

    throughput_share.py GROUP [ID]

Prints "joined ID", then "share S version V": first the share the join answered,
then one line each time the group's allocation gives this member another share.
Stops after $EVENTS share lines or $TIMEOUT seconds (0, the default for both: no
limit), or on Ctrl-C. Leaving closes the lease's stream, which ends the
membership at once: the others share the limit.

A restart of the sidecar (kill -USR2, or kill -9 and a successor on the same
--state-dir) ends its streams: they are opened again (with Last-Event-ID),
after 50 ms doubling to 1 s, and the membership goes on. The program exits 1
when the sidecar says the lease is gone (404, or its stream's last event), or
when the sidecar cannot be reached for TTL seconds (the lease expired then).

Environment: COORD_ADDR (default http://127.0.0.1:8080), WEIGHT (default 1), TTL
(seconds, default 10), EVENTS, TIMEOUT. Python 3 standard library only, and
coord.py beside it (the address, one call, the lease's stream and the group's,
followed through restarts).
"""
import os
import signal
import sys
import threading
import urllib.parse

from coord import call, events, hold_lease


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
    ttl = int(os.environ.get("TTL", "10"))
    query = urllib.parse.urlencode({"id": me, "weight": os.environ.get("WEIGHT", "1"), "ttl": f"{ttl}s"})
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
    threading.Thread(target=hold_lease, args=(joined["lease"], ttl), daemon=True).start()

    # 3. Follow the group: `throughput` events (data: the group, as GET
    #    /v1/throughput/GROUP answers it), the current allocation first, then every
    #    new one; `leader` events (a new computing member) do not matter here.
    #    After a restart of the sidecar, the allocation now again.
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


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit(130)
    except RuntimeError as e:  # the group's stream refused
        sys.exit(f"throughput_share.py: {e}")
    except OSError as e:  # the sidecar cannot be reached
        sys.exit(f"throughput_share.py: {e}")
