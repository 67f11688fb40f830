"""kazoo, the Python ZooKeeper client, as a peer of the sidecar's keys.

    kazoo_peer.py SERVERS get PATH          -> {"data", "version", "children"}
    kazoo_peer.py SERVERS create PATH DATA  (makepath: parents with empty data)
    kazoo_peer.py SERVERS set PATH DATA     -> {"version"}
    kazoo_peer.py SERVERS delete PATH       (recursive)
"""
import json
import sys

from kazoo.client import KazooClient


def main():
    servers, cmd, path = sys.argv[1], sys.argv[2], sys.argv[3]
    zk = KazooClient(hosts=servers, timeout=10)
    zk.start(timeout=30)
    try:
        if cmd == "get":
            data, st = zk.get(path)
            out = {"data": None if data is None else data.decode("utf-8"), "version": st.version,
                   "children": sorted(zk.get_children(path))}
        elif cmd == "create":
            zk.create(path, sys.argv[4].encode("utf-8"), makepath=True)
            out = {}
        elif cmd == "set":
            st = zk.set(path, sys.argv[4].encode("utf-8"))
            out = {"version": st.version}
        elif cmd == "delete":
            zk.delete(path, recursive=True)
            out = {}
        else:
            raise SystemExit("unknown command " + cmd)
        print(json.dumps(out))
    finally:
        zk.stop()
        zk.close()


if __name__ == "__main__":
    main()
