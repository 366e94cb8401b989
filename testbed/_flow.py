"""Bulk TCP flows for the congested-link fault (no iperf3 needed).

``_flow.py serve PORT``: accept connections; a connection whose first byte
is ``u`` is read and discarded, one whose first byte is ``d`` is written to.
``_flow.py connect ADDR PORT FLOWS [SECONDS]``: FLOWS connections each way,
for SECONDS (default one hour; the fault's removal kills it sooner).  It
prints ``flowing`` once every connection has moved its first megabyte, so
that the fault is in force when its apply returns, not merely launched.
"""
import socket
import sys
import threading
import time

CHUNK = b"\0" * (1 << 20)


def _pump(sock, upload, started=None):
    moved = 0
    try:
        while True:
            if upload:
                sock.sendall(CHUNK)
                moved += len(CHUNK)
            else:
                got = sock.recv(1 << 20)
                if not got:
                    return
                moved += len(got)
            if started is not None and moved >= len(CHUNK):
                started.set()
                started = None
    except OSError:
        return


def serve(port):
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("0.0.0.0", port))
    srv.listen(16)
    while True:
        conn, _ = srv.accept()
        mode = conn.recv(1)
        # the client uploads ("u"): we read; it downloads ("d"): we write
        threading.Thread(target=_pump, args=(conn, mode == b"d"), daemon=True).start()


def _connect(addr, port, attempts=20):
    for k in range(attempts):
        try:
            return socket.create_connection((addr, port), timeout=2)
        except OSError:
            if k == attempts - 1:
                raise
            time.sleep(0.25)


def connect(addr, port, flows, seconds):
    started = []
    for _ in range(flows):
        for mode in (b"u", b"d"):
            s = _connect(addr, port)
            s.settimeout(None)
            s.sendall(mode)
            started.append(threading.Event())
            threading.Thread(target=_pump, args=(s, mode == b"u", started[-1]),
                             daemon=True).start()
    for event in started:
        event.wait()
    print("flowing", flush=True)
    time.sleep(seconds)


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        serve(int(sys.argv[2]))
    else:
        connect(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]),
                float(sys.argv[5]) if len(sys.argv) > 5 else 3600.0)
