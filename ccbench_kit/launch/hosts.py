"""Hosts for multi-node runs: host lists and files, ranks per node, and
topology-aware ordering.

Ranks are placed in blocks: with ``-r 8 -N 2`` ranks 0-3 run on the first
host and 4-7 on the second (nccom-test divides the workers equally among the
nodes).  The order of the hosts is therefore the order of the ranks, which is
why a host file sorted by network topology (hosts under the same leaf switch
next to each other, as the AWS recipe's hostfile_topologify does) puts
neighbouring ranks close together.
"""
import ipaddress
import os
import queue
import re
import socket
import threading
import time
from dataclasses import dataclass

from .._files import atomic_write_text
from ..errors import ConfigError
from ..bounded import loads_json, read_text
from ..output_path import open_regular

_HOSTNAME = re.compile(r"^[A-Za-z0-9_.\-\[\]:]+$")


@dataclass(frozen=True)
class Host:
    """One host; `slots` is what a host file said it takes (None: not said)."""

    name: str
    slots: int = None


def parse_hosts(spec, flag="--hosts"):
    """Hosts from ``"a,b"``, ``["a", "b:4"]`` or ``"a b"``; ``name:N`` gives N slots."""
    if spec is None:
        return []
    items = spec.replace(",", " ").split() if isinstance(spec, str) else \
        [w for s in spec for w in str(s).replace(",", " ").split()]
    hosts = [_host(item, flag) for item in items]
    if not hosts:
        raise ConfigError("no hosts given", flag)
    _no_duplicates(hosts, flag)
    return hosts


def given_hosts(hosts=None, hosts_file=None):
    """The hosts given by ``--hosts`` (names, ``name:N``, or `Host`s already
    read) or ``--hosts-file``, read once: a list of `Host`, or None when
    neither is given (ConfigError for both)."""
    if hosts and hosts_file:
        raise ConfigError("give --hosts or --hosts-file, not both", "--hosts")
    if hosts_file:
        return read_hostfile(hosts_file)
    if hosts:
        return list(hosts) if all(isinstance(h, Host) for h in hosts) else parse_hosts(hosts)
    return None


def _host(item, flag, slots=None):
    name = item
    m = re.match(r"^(.*?):(\d+)$", item)
    # an IPv6 address has colons of its own: only `name:N` with a plain name
    if m and ":" not in m.group(1):
        name, slots = m.group(1), int(m.group(2))
    if not name or not _HOSTNAME.match(name):
        raise ConfigError(f"{item!r} is not a host name", flag)
    if slots is not None and slots < 1:
        raise ConfigError(f"host {name!r} has {slots} slots; need at least 1", flag)
    return Host(name, slots)


def _no_duplicates(hosts, flag):
    seen = set()
    for h in hosts:
        if h.name in seen:
            raise ConfigError(f"host {h.name!r} is listed twice", flag)
        seen.add(h.name)


def read_hostfile(path, flag="--hosts-file"):
    """Hosts in a file: one a line (nccom-test), or Open MPI's ``name slots=N``.

    Blank lines and ``#`` comments are skipped.
    """
    path = os.fspath(path)
    try:
        with open_regular(path) as f:
            lines = f.read().decode("utf-8", errors="replace").splitlines()
    except OSError as e:
        raise ConfigError(f"cannot read host file {path}: {e.strerror}", flag) from e
    hosts = []
    for n, line in enumerate(lines, 1):
        words = line.split("#", 1)[0].split()
        if not words:
            continue
        slots = None
        for w in words[1:]:
            m = re.match(r"^(?:slots|max[-_]slots)=(\d+)$", w)
            if not m:
                raise ConfigError(f"{path} line {n}: cannot read {w!r} (expected "
                                  "one host per line, optionally `slots=N`)", flag)
            if w.startswith("slots"):
                slots = int(m.group(1))
        hosts.append(_host(words[0], f"{flag} {path} line {n}", slots))
    if not hosts:
        raise ConfigError(f"host file {path} lists no hosts", flag)
    _no_duplicates(hosts, f"{flag} {path}")
    return hosts


def write_hostfile(hosts, path):
    """Write one host a line, with Open MPI's ``slots=N`` where a `Host` has it."""
    hosts = [h if isinstance(h, Host) else Host(str(h)) for h in hosts]
    text = "".join(f"{h.name} slots={h.slots}\n" if h.slots else f"{h.name}\n" for h in hosts)
    return atomic_write_text(path, text)


@dataclass(frozen=True)
class Placement:
    """`ranks_per_node` ranks on each of `hosts` (`Host`), in this order."""

    hosts: tuple
    ranks_per_node: int

    @property
    def names(self):
        return [h.name for h in self.hosts]

    @property
    def nnodes(self):
        return len(self.hosts)

    @property
    def nranks(self):
        return self.nnodes * self.ranks_per_node

    def host_of_rank(self, rank):
        return self.hosts[rank // self.ranks_per_node].name


def place(nranks, hosts=None, hosts_file=None, nnodes=None, ranks_per_node=None):
    """Where each rank runs, or None when everything runs on this machine.

    Parameters
    ----------
    nranks : int
        Total ranks (``-r``).
    hosts, hosts_file
        The hosts (``--hosts``, ``--hosts-file``); at most one of them.
    nnodes : int, optional
        Nodes to use (``-N``): the first `nnodes` hosts.  Default: all hosts.
    ranks_per_node : int, optional
        Must equal ``nranks / nnodes`` when given; with neither `nnodes` nor
        hosts it is an error.

    Raises
    ------
    ConfigError
        Naming the flag: both host sources, more nodes than hosts, ranks that
        don't divide evenly among the nodes...
    """
    hosts = given_hosts(hosts, hosts_file)
    for value, flag in ((nnodes, "-N/--nnodes"), (ranks_per_node, "--ranks-per-node")):
        if value is not None and (not isinstance(value, int) or value < 1):
            raise ConfigError(f"must be a positive integer, got {value!r}", flag)
    if not hosts:
        if nnodes not in (None, 1):
            raise ConfigError(f"{nnodes} nodes need --hosts or --hosts-file (or "
                              "-S/--slurm-mode to let Slurm choose them)", "-N/--nnodes")
        if ranks_per_node not in (None, nranks):
            raise ConfigError(f"{ranks_per_node} ranks per node on one node, but "
                              f"-r is {nranks}", "--ranks-per-node")
        return None
    if nnodes is None:
        nnodes = len(hosts) if ranks_per_node is None else -(-nranks // ranks_per_node)
        if nnodes > len(hosts):
            raise ConfigError(f"-r {nranks} at {ranks_per_node} ranks per node needs {nnodes} "
                              f"nodes, but only {len(hosts)} hosts are given", "--ranks-per-node")
    if nnodes > len(hosts):
        raise ConfigError(f"{nnodes} nodes asked for but only {len(hosts)} hosts given "
                          f"({', '.join(h.name for h in hosts)})", "-N/--nnodes")
    if nranks % nnodes:
        raise ConfigError(f"{nranks} ranks don't divide evenly among {nnodes} nodes; "
                          "use a multiple of the node count", "-r/--nworkers")
    per = nranks // nnodes
    if ranks_per_node is not None and ranks_per_node != per:
        raise ConfigError(f"{ranks_per_node} ranks per node x {nnodes} nodes is not "
                          f"-r {nranks}", "--ranks-per-node")
    small = [h for h in hosts[:nnodes] if h.slots is not None and h.slots < per]
    if small:
        h = small[0]
        raise ConfigError(f"host {h.name} has {h.slots} slots but {per} ranks per node "
                          "are needed", "--hosts-file" if hosts_file else "--hosts")
    return Placement(tuple(hosts[:nnodes]), per)


# -- topology-aware ordering -----------------------------------------------

def _load_json(source, flag):
    if isinstance(source, (dict, list)):
        return source
    path = os.fspath(source)
    try:
        return loads_json(read_text(path, "JSON"))
    except ConfigError as e:
        raise ConfigError(str(e), flag) from None
    except OSError as e:
        raise ConfigError(f"cannot read {path}: {e.strerror}", flag) from e
    except ValueError as e:
        raise ConfigError(f"{path} is not valid JSON ({e})", flag) from e


def load_topology(source, flag="--topology"):
    """{instance id: (network node, ...) top level first} from EC2's
    DescribeInstanceTopology output: one response, a list of paginated
    responses, or a bare list of instances."""
    data = _load_json(source, flag)
    pages = data if isinstance(data, list) and data and isinstance(data[0], dict) \
        and "Instances" in data[0] else [data]
    topo = {}
    for page in pages:
        instances = page.get("Instances") if isinstance(page, dict) else page
        if not isinstance(instances, list):
            raise ConfigError("expected DescribeInstanceTopology output: an object "
                              "with an \"Instances\" list", flag)
        for k, inst in enumerate(instances):
            iid = inst.get("InstanceId") if isinstance(inst, dict) else None
            nodes = inst.get("NetworkNodes") if isinstance(inst, dict) else None
            if not isinstance(iid, str) or not isinstance(nodes, list) or not nodes \
                    or not all(isinstance(n, str) for n in nodes):
                raise ConfigError(f"instance {k}: needs \"InstanceId\" and a non-empty "
                                  "\"NetworkNodes\" list of strings", flag)
            if iid in topo and topo[iid] != tuple(nodes):
                raise ConfigError(f"instance {iid} appears twice with different "
                                  "network nodes", flag)
            topo[iid] = tuple(nodes)
    depths = {len(v) for v in topo.values()}
    if len(depths) > 1:
        raise ConfigError(f"instances have different numbers of network node levels "
                          f"({sorted(depths)}); expected one depth", flag)
    return topo


def load_instance_map(source, flag="--instances"):
    """{host name or address: instance id}: a flat JSON object, or EC2's
    DescribeInstances output (private DNS names, their short form, and every
    private IP address name the instance)."""
    data = _load_json(source, flag)
    if isinstance(data, dict) and "Reservations" not in data:
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in data.items()):
            raise ConfigError("expected {host: instance id} or DescribeInstances output", flag)
        return dict(data)
    reservations = data.get("Reservations") if isinstance(data, dict) else None
    if not isinstance(reservations, list):
        raise ConfigError("expected {host: instance id} or DescribeInstances output", flag)
    out = {}
    for res in reservations:
        for inst in res.get("Instances", []):
            iid = inst.get("InstanceId")
            names = [inst.get("PrivateDnsName"), inst.get("PrivateIpAddress")]
            for nic in inst.get("NetworkInterfaces", []):
                names.append(nic.get("PrivateIpAddress"))
                names += [a.get("PrivateIpAddress") for a in nic.get("PrivateIpAddresses", [])]
            for n in filter(None, names):
                out[n] = iid
                if not _is_ip(n):
                    out[n.split(".")[0]] = iid
    return out


def _is_ip(text):
    try:
        ipaddress.ip_address(text)
        return True
    except ValueError:
        return False


def _instance_of(host, topology, instance_map):
    if host in topology:
        return host
    for key in (host, host.split(".")[0]):
        if key in instance_map:
            return instance_map[key]
    # EC2's default names: ip-10-1-2-3 is 10.1.2.3
    m = re.match(r"^ip-(\d+)-(\d+)-(\d+)-(\d+)(\..*)?$", host)
    if m:
        return instance_map.get(".".join(m.groups()[:4]))
    return None


def topology_order(hosts, topology, instance_map=None):
    """`hosts` reordered so that hosts under the same network node, at every
    level, are contiguous (leaf switches within spines within the top level).

    Groups keep the order in which their first host appears, so an already
    good order is kept.  Returns ``(ordered, unplaced)``: hosts with no known
    instance or topology come last, in their original order, and are listed
    in `unplaced` too.
    """
    names = [h.name if isinstance(h, Host) else str(h) for h in hosts]
    topology = topology if isinstance(topology, dict) and all(
        isinstance(v, tuple) for v in topology.values()) else load_topology(topology)
    instance_map = load_instance_map(instance_map) if instance_map else {}
    tree, unplaced = {}, []
    for name in names:
        iid = _instance_of(name, topology, instance_map)
        if iid is None or iid not in topology:
            unplaced.append(name)
            continue
        node = tree
        for level in topology[iid]:
            node = node.setdefault(level, {})
        node.setdefault(None, []).append(name)
    ordered = []

    def walk(node):
        for key, child in node.items():
            if key is None:
                ordered.extend(child)
            else:
                walk(child)
    walk(tree)
    return ordered + unplaced, unplaced


def topology_sort_file(input_path, topology, output_path=None, instance_map=None):
    """Read a host file, sort it with `topology_order`, write `output_path`.

    Returns ``(ordered, unplaced)``.
    """
    hosts = read_hostfile(input_path, "--input")
    ordered, unplaced = topology_order(hosts, topology, instance_map)
    if output_path:
        by_name = {h.name: h for h in hosts}
        write_hostfile([by_name[n] for n in ordered], output_path)
    return ordered, unplaced


# -- names that resolve ----------------------------------------------------

#: seconds for looking up every host name of a check, whatever their number
RESOLVE_TIMEOUT = 20.0
_RESOLVERS = 64


def addresses(names, timeout=RESOLVE_TIMEOUT):
    """{name: set of its addresses, empty where it does not resolve} for
    `names`; a lookup still running after `timeout` seconds in all counts
    as empty.

    Lookups run concurrently on daemon threads (getaddrinfo blocks, and a
    thousand names one by one took minutes); a lookup still running at the
    deadline is left behind, never waited for.
    """
    uniq = list(dict.fromkeys(names))
    todo, result = queue.Queue(), {}
    for n in uniq:
        todo.put(n)

    def work():
        while True:
            try:
                name = todo.get_nowait()
            except queue.Empty:
                return
            try:
                found = {name} if _is_ip(name) else \
                    {info[4][0] for info in socket.getaddrinfo(name, None)}
            except (OSError, UnicodeError):
                found = set()
            result[name] = found

    workers = [threading.Thread(target=work, daemon=True, name="ccbench-resolve")
               for _ in range(min(_RESOLVERS, len(uniq)))]
    for w in workers:
        w.start()
    deadline = time.monotonic() + timeout
    for w in workers:
        w.join(max(0.0, deadline - time.monotonic()))
    return {n: set(result.get(n, ())) for n in uniq}


def unresolvable(names, timeout=RESOLVE_TIMEOUT):
    """The names of `names` (in order) that do not resolve to an address,
    and those whose lookup did not end within `timeout` seconds in all."""
    return [n for n, found in addresses(names, timeout).items() if not found]


def check_resolvable(names, flag="--hosts", timeout=RESOLVE_TIMEOUT):
    """ConfigError naming the first few of `names` that do not resolve, or
    two of them that are one host (`check_one_name_each`): each name is
    looked up once for both."""
    found = addresses(names, timeout)
    bad = [n for n, got in found.items() if not got]
    if bad:
        shown = ", ".join(bad[:5]) + (f" and {len(bad) - 5} more" if len(bad) > 5 else "")
        raise ConfigError(f"{len(bad)} of {len(set(names))} host names do not resolve to an "
                          f"address (or not within {timeout:g} s): {shown}", flag)
    check_one_name_each(names, flag, timeout, found)


# -- one name per host -------------------------------------------------------

def _is_loopback(address):
    try:
        return ipaddress.ip_address(address.split("%")[0]).is_loopback
    except ValueError:
        return False


def this_host(names, found=None, timeout=RESOLVE_TIMEOUT):
    """The names of `names` that are this host: its host name (short or
    long), or a name that resolves to a loopback address or to one of the
    host name's addresses; `found`: `addresses` of `names`, if known."""
    own = {socket.gethostname(), socket.gethostname().split(".")[0]}
    found = found if found is not None else addresses(names, timeout)
    mine = {a for a in addresses(sorted(own), timeout).get(socket.gethostname(), ())
            if not _is_loopback(a)}
    return [n for n in dict.fromkeys(names)
            if n in own or any(_is_loopback(a) or a in mine for a in found.get(n, ()))]


def check_one_name_each(names, flag="--hosts", timeout=RESOLVE_TIMEOUT, found=None):
    """ConfigError when two of `names` are one host: two names of this host
    (``localhost``, ``127.0.0.1``, its host name) or two that share an
    address.  Open MPI places every name of the host it runs on as that one
    node, so a placement of K ranks on each name cannot be made (its
    internal-error banner), and a health check would compare a node with
    itself; refused, before any launch, rather than quietly run as fewer
    nodes than asked for.  Names that do not resolve are left to the
    checks that refuse them.  `found`: `addresses` of `names`, if known."""
    found = found if found is not None else addresses(names, timeout)
    local = this_host(names, found, timeout)
    pair = local[:2] if len(local) > 1 else None
    if pair is None:
        owner = {}
        for n in dict.fromkeys(names):
            hit = next((owner[a] for a in found[n] if a in owner), None)
            if hit is not None:
                pair = [hit, n]
                break
            owner.update(dict.fromkeys(found[n], n))
    if pair:
        where = "this host" if pair[0] in local else \
            f"address {sorted(found[pair[0]] & found[pair[1]])[0]}"
        raise ConfigError(f"{pair[0]!r} and {pair[1]!r} are two names of one host ({where}): "
                          "Open MPI places them as one node; name each host once", flag)
