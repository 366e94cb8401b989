"""The tcp backend: sendrecv and all_reduce over plain TCP sockets between
the ranks, on host buffers, with no MPI on the data path.

Each rank holds a connection to the next rank of its communicator and one
from the previous (a ring, made once as the backend starts; two ranks share
one connection, both ways, as a pair of hosts would).  ``sendrecv`` sends
the whole buffer to the next rank and receives the previous rank's, the
kit's sendrecv; ``all_reduce`` is a ring over the same links
(reduce-scatter, then all-gather, n - 1 steps each), so it runs at the rate
of the ring's slowest link.

Why sockets and not MPI's own TCP transport: a rank blocked in ``recv``
sleeps in the kernel and is woken when the bytes arrive, where an MPI rank
polls.  On a host shared with other work (or the emulated nodes of one
machine) a polling rank measures the CPU scheduler, a sleeping one the
link.  That makes it the doctor's transport for the management network
(``ccbench doctor --backend tcp``), and ``ccbench run
--backend tcp`` a measure of what that network gives plain sockets.

MPI stays the control plane (base.py): the ranks exchange their listening
addresses and a secret over the communicator, and a connection that does
not present the secret is refused, so no other process can take a ring's
place.

Transfers of up to `INLINE_BYTES` (they fit in a socket's buffer, so a
send never waits for the receiver) go in turn: even ranks send, then
receive; odd ranks receive, then send.  Two ranks therefore play
ping-pong, and a call of 8 B is one round trip on one connection.  That is
what makes a lossy link visible: after a lost segment nothing more is
sent until Linux retransmits it (a timeout of 200 ms or more: the doctor
counts such calls, `health.verdict`), where two ends sending at once, or a
connection each way, let the next segments reveal the loss within a round
trip (measured on the testbed: 0 of 2 lossy links found that way, 8 of 8
this way; bench/RESULTS.md, issue 34).
Larger transfers go both ways at once: a thread sends while the rank
receives, each direction at its own link's rate.

A node's own ranks share a host, not the management network: the doctor
checks a node through `node_backend` (mpi), whose ranks poll, so a node
whose cores are taken by other work shows it (through sockets its ranks
sleep and show 1.1-1.4 times their peers' time, against 100-340 times).
"""
import fcntl
import os
import socket
import struct
import threading
import time

import numpy as np

from .base import Backend
from .hostloop import HostBuffers, time_on_host
from ..dtypes import DTYPES, OPS
from ..errors import ConfigError, RunError

ALGORITHM = "ring"
COLLECTIVES = ("sendrecv", "all_reduce")
# the engine's op numbers (dtypes.OPS) this backend reduces with
UFUNCS = {OPS["sum"]: np.add, OPS["prod"]: np.multiply, OPS["min"]: np.minimum,
          OPS["max"]: np.maximum}
INLINE_BYTES = 4096
CONNECT_TIMEOUT_S = 30.0
SECRET_BYTES = 16


class TCPBackend(HostBuffers, Backend):
    name = "tcp"
    default_algorithm = ALGORITHM
    ring_algorithm = ALGORITHM
    host_buffers = True
    timing = "host-clock"
    node_backend = "mpi"

    @classmethod
    def algorithms_for(cls, collective):
        return [ALGORITHM] if collective in COLLECTIVES else []

    @classmethod
    def data_types(cls):
        # the types numpy adds as numbers (bf16 and fp8 are bit patterns here)
        return tuple(n for n, d in DTYPES.items() if d.is_float == (d.storage.kind == "f"))

    @classmethod
    def dtype_refusal(cls, name):
        if name not in cls.data_types():
            return f"the tcp backend has no {name}; it runs {', '.join(cls.data_types())}"
        return None

    @classmethod
    def reduction_ops(cls):
        return tuple(name for name, number in OPS.items() if number in UFUNCS)

    @property
    def library(self):
        return "TCP sockets (Linux kernel " + os.uname().release + ")"

    @property
    def device_name(self):
        return "cpu"

    def __init__(self, comm, options=None, world=None, placement=None):
        super().__init__(comm, options, world, placement)
        self.right = self.left = None
        if comm.Get_size() > 1:
            self.right, self.left = ring_links(comm)

    def time(self, collective, algorithm, buffers, *, count, dtype, op, root, warmup, iters,
             agg=1, blocking=0, progress=None, once=False, **vectors):
        if collective not in COLLECTIVES:
            raise ConfigError(f"the tcp backend runs {' and '.join(COLLECTIVES)}, not "
                              f"{collective}", "collective")
        self.check_dtype(dtype.name)
        if collective == "all_reduce" and op not in UFUNCS:
            raise ConfigError(f"the tcp backend reduces with {', '.join(self.reduction_ops())}",
                              "-o/--op")
        return time_on_host(lambda send, recv, n: self._call(collective, send, recv, n, op),
                            buffers, self.comm, count=count, warmup=warmup, iters=iters, agg=agg,
                            blocking=blocking, progress=progress, once=once)

    def blocking_mode(self, mode):
        from .blocking import BLOCKING_ON_RETURN  # lazy: only for the mode-2 sentence
        text = super().blocking_mode(mode)
        return f"{text} ({BLOCKING_ON_RETURN})" if int(mode) == 2 else text

    def _call(self, collective, send, recv, count, op):
        if self.right is None:  # one rank: its own data
            if not np.shares_memory(send, recv):
                recv[:count] = send[:count]
            return
        if collective == "sendrecv":
            out = send[:count]
            if np.shares_memory(send, recv):  # in place: what is sent is read first
                out = out.copy()
            shift(self.right, self.left, out, recv[:count], self.comm.Get_rank())
        else:
            if not np.shares_memory(send, recv):
                recv[:count] = send[:count]
            ring_allreduce((self.right, self.left), recv[:count], self.comm.Get_rank(),
                           self.comm.Get_size(), UFUNCS[op])

    def close(self):
        for conn in (self.right, self.left):
            if conn is not None:
                conn.close()
        self.right = self.left = None


def shift(right, left, out, into, rank):
    """Send `out` to the right and receive `into` from the left: in turn
    (even `rank`s first) where `out` fits in a socket's buffer, else at
    once (the module docstring says why)."""
    view = memoryview(np.ascontiguousarray(out)).cast("B")
    if view.nbytes <= INLINE_BYTES:
        if rank % 2 == 0:
            right.sendall(view)
            _recv_exact(left, memoryview(into).cast("B"))
        else:
            _recv_exact(left, memoryview(into).cast("B"))
            right.sendall(view)
        return
    failed = []

    def send():
        try:
            right.sendall(view)
        except OSError as e:
            failed.append(e)
    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    _recv_exact(left, memoryview(into).cast("B"))
    sender.join()
    if failed:
        raise failed[0]


def ring_allreduce(ring, x, r, n, ufunc=np.add):
    """`x` reduced over the ring with `ufunc`, in place (reduce-scatter, then
    all-gather, n - 1 steps each): every link carries 2 (n - 1) / n of `x`,
    so the ring runs at its slowest link's rate.  Every rank ends with the
    same bits: each chunk is reduced in one order, then copied."""
    right, left = ring
    chunks = np.array_split(x, n)
    tmp = np.empty(max(c.size for c in chunks), dtype=x.dtype)
    for s in range(n - 1):
        k = (r - s - 1) % n
        got = tmp[:chunks[k].size]
        shift(right, left, chunks[(r - s) % n], got, r)
        ufunc(chunks[k], got, out=chunks[k])
    for s in range(n - 1):
        shift(right, left, chunks[(r + 1 - s) % n], chunks[(r - s) % n], r)


def ring_links(comm, timeout=CONNECT_TIMEOUT_S):
    """(to the right, from the left): TCP connections to the next and the
    previous rank of `comm`, blocking, without Nagle; of two ranks, one
    connection (rank 1's to rank 0), both ways.  A collective over `comm`."""
    n, r = comm.Get_size(), comm.Get_rank()
    srv = socket.create_server(("", 0))
    srv.settimeout(timeout)
    secret = os.urandom(SECRET_BYTES)
    ends = comm.allgather((interface_addresses(), srv.getsockname()[1], secret))
    right = left = None
    try:
        if n > 2 or r == 1:
            addrs, port, theirs = ends[(r + 1) % n]
            right = _connect_any(addrs, port)  # the peer's backlog holds it until accepted
            right.sendall(theirs)
        if n > 2 or r == 0:
            left = _accept_with(srv, secret, timeout)
    finally:
        srv.close()
    return _blocking(right or left), _blocking(left or right)


def _accept_with(srv, secret, timeout):
    """The first connection to `srv` that presents `secret`; others closed."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            srv.settimeout(max(deadline - time.monotonic(), 0.001))
            conn, _ = srv.accept()
        except socket.timeout:
            raise RunError(f"no ring neighbour connected within {timeout:g} s") from None
        conn.settimeout(max(deadline - time.monotonic(), 0.001))
        got = bytearray(SECRET_BYTES)
        try:
            _recv_exact(conn, memoryview(got))
        except OSError:
            conn.close()
            continue
        if bytes(got) == secret:
            return conn
        conn.close()


def interface_addresses():
    """This host's IPv4 addresses, loopback last (for a peer to connect to)."""
    found = []
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for _, name in socket.if_nameindex():
            try:  # SIOCGIFADDR
                packed = fcntl.ioctl(s.fileno(), 0x8915, struct.pack("256s", name[:15].encode()))
            except OSError:
                continue
            found.append(socket.inet_ntoa(packed[20:24]))
    return sorted(found, key=lambda a: a.startswith("127."))


def _connect_any(addrs, port):
    """A connection to the first of `addrs` that answers on `port`."""
    errors = []
    for addr in addrs:
        try:
            return socket.create_connection((addr, port), timeout=5)
        except OSError as e:
            errors.append(f"{addr}: {e}")
    raise OSError(f"cannot reach the other end on port {port}: {'; '.join(errors)}")


def _blocking(conn):
    """`conn` made blocking, without Nagle (a message goes out as it is sent)."""
    conn.settimeout(None)
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return conn


def _recv_exact(conn, view):
    got = 0
    while got < len(view):
        n = conn.recv_into(view[got:])
        if n == 0:
            raise OSError("the other end closed the connection")
        got += n
