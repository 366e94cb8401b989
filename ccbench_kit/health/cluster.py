"""The health check on the workers of a Dask-MPI cluster (``ccbench cluster``).

The workers are MPI ranks of one job already running, so the check runs
the way a sweep does there (`launch.dask`): the probe (`probe.run`) is an
ordinary task pinned to each chosen worker, on a communicator of those
workers' world ranks (cached by the `MPICommunicators` plugin).  Nothing
is launched: the nodes checked are the hosts the workers run on, the very
processes and placement the cluster's users get.  (Resolving the workers'
hosts and starting a new mpirun on them would check other processes, need
a launcher that reaches those hosts, and start a second job beside the
running one.)

Each node takes part with the same number of workers (the fewest any node
has, or ``ranks_per_node``): the local check compares nodes, so they must
run the same all_reduce.  Rank 0 of the probe reports every step as a Dask
event; no event for ``timeout`` seconds ends the wait.
"""
import json
import socket
import time
import uuid

from ..errors import ConfigError
import numpy as np
from ..progress_board import WIDTH
from .probe import Progress, run

DEFAULT_TIMEOUT = 60.0


def _hostname():
    return socket.gethostname()


def choose_workers(client, ranks_per_node=None, nnodes=None):
    """([(worker address, world rank)], node names): `ranks_per_node`
    workers of every node (default the fewest any node has) of the first
    `nnodes` nodes (default all), nodes in the order of their first
    worker's rank."""
    # lazy: launch.dask imports distributed, an optional dependency (cluster extra)
    from ..launch.dask import worker_ranks
    workers = worker_ranks(client)
    host_of = client.run(_hostname)
    by_node = {}
    for addr, rank in workers:
        by_node.setdefault(host_of[addr], []).append((addr, rank))
    nodes = list(by_node)
    if len(nodes) < 2:
        raise ConfigError(f"the cluster's {len(workers)} workers run on {len(nodes)} node "
                          f"({', '.join(nodes)}): a health check compares nodes, it needs "
                          "workers on at least 2", "--scheduler-file")
    if nnodes is not None:
        if not isinstance(nnodes, int) or not 2 <= nnodes <= len(nodes):
            raise ConfigError(f"between 2 and the {len(nodes)} nodes the cluster's workers run "
                              f"on ({', '.join(nodes)}), got {nnodes}", "-N/--nnodes")
        nodes = nodes[:nnodes]
    fewest = min(len(by_node[node]) for node in nodes)
    k = fewest if ranks_per_node is None else ranks_per_node
    if not isinstance(k, int) or not 1 <= k <= fewest:
        raise ConfigError(f"{k} ranks per node asked for but a node of the cluster has "
                          f"{fewest} worker(s)", "--ranks-per-node")
    chosen = sorted((w for node in nodes for w in by_node[node][:k]), key=lambda w: w[1])
    return chosen, nodes


def _probe_task(plan_json, members, topic):
    """One worker's part of the check, in a worker thread (`launch.dask`)."""
    from distributed import get_worker  # lazy: optional dependency (cluster extra)

    # lazy: launch.dask imports distributed, an optional dependency (cluster extra)
    from ..launch.dask import PLUGIN_NAME
    worker = get_worker()
    plan = json.loads(plan_json)
    comm = worker.plugins[PLUGIN_NAME].communicator(members).Dup()

    def keep(raw):  # rank 0, after every step
        try:  # kept for a run that hangs, where the client's disk is shared
            raw.write(plan["out"])
        except OSError:
            pass  # not shared: the task's result carries the records
        worker.log_event(topic, {"steps": len(raw.local) + len(raw.pair) + len(raw.bisect)})
    try:
        raw = run(comm, plan, Progress(np.zeros(WIDTH, dtype=np.int64)), keep)
        comm.Barrier()
        return raw.to_json() if comm.Get_rank() == 0 else None
    finally:
        comm.Free()


def run_on_workers(client, workers, plan, timeout=None):
    """Run the probe on `workers`; (rank 0's records as JSON or None, the
    failure message or None)."""
    from distributed import Lock  # lazy: optional dependency (cluster extra)

    # lazy: launch.dask imports distributed, an optional dependency (cluster extra)
    from ..launch.dask import PLUGIN_NAME, MPICommunicators
    timeout = timeout or DEFAULT_TIMEOUT
    token = uuid.uuid4().hex[:12]
    topic = f"ccbench-doctor-{token}"
    last = [time.monotonic()]
    client.register_plugin(MPICommunicators(), name=PLUGIN_NAME)
    client.subscribe_topic(topic, lambda event: last.__setitem__(0, time.monotonic()))
    members = [rank for _, rank in workers]
    # one sweep or check at a time per cluster: two sharing workers could
    # enter their collectives in different orders and deadlock
    with Lock("ccbench-sweep", scheduler_rpc=client.scheduler, loop=client.loop):
        try:
            futures = [client.submit(_probe_task, json.dumps(plan), members, topic,
                                     workers=[addr], allow_other_workers=False, pure=False,
                                     retries=0, key=f"ccbench-doctor-{token}-rank{i}")
                       for i, (addr, _) in enumerate(workers)]
            # the futures' state, polled: `distributed.wait` needs a default client
            while not all(f.done() for f in futures) and \
                    not any(f.status == "error" for f in futures):
                if time.monotonic() - last[0] > timeout:
                    return None, (f"no progress for {timeout:.0f} s (--timeout): the "
                                  "workers may still be inside a collective; restart the "
                                  "cluster (ccbench cluster stop, then start)")
                time.sleep(0.2)
            failed = [(i, f) for i, f in enumerate(futures) if f.status == "error"]
            if failed:
                i, f = failed[0]
                err = f.exception()
                return None, (f"rank {i} (worker {workers[i][0]}) failed: "
                              f"{type(err).__name__}: {err}")
            return futures[0].result(), None
        finally:
            client.unsubscribe_topic(topic)
