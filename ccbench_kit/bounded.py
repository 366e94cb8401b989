"""Reading JSON and YAML that users hand us, within bounds.

A file of the wrong kind (a 10 GB log given as a JSON flag), nesting a
thousand levels deep, or a YAML "billion laughs" (a few lines of anchors
and aliases that expand to 10^9 nodes) must cost one line and exit 2, not a
RecursionError traceback or all the machine's memory.  Inputs the kit reads
are small: groups, counts, suites, topologies.
"""
import json
import os

from .errors import ConfigError
from ._optional import require
from .output_path import open_regular

#: bytes of one JSON or YAML input file
MAX_BYTES = 64 << 20
#: levels of nesting (the kit's own inputs use 4 at most)
MAX_DEPTH = 64
#: nodes of a YAML document once its aliases are expanded
MAX_YAML_NODES = 1_000_000


def read_text(path, what, limit=MAX_BYTES):
    """The text of `path` (UTF-8; a leading byte-order mark, which Windows
    editors write, is dropped), refused past `limit` bytes.  OSError and
    UnicodeDecodeError go to the caller, which knows the flag to name."""
    with open_regular(path) as f:
        if os.fstat(f.fileno()).st_size > limit:  # refused before a byte is read
            raise ConfigError(f"{path}: larger than {limit >> 20} MiB; not {what}")
        data = f.read(limit + 1)
    if len(data) > limit:
        raise ConfigError(f"{path}: larger than {limit >> 20} MiB; not {what}")
    return data.decode("utf-8-sig")


def depth(value, limit=MAX_DEPTH):
    """Nesting depth of parsed JSON/YAML data, counted without recursion;
    stops counting past `limit`."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, (list, dict)):
            deepest = max(deepest, d)
            if deepest > limit:
                return deepest
            stack.extend((c, d + 1) for c in (v.values() if isinstance(v, dict) else v))
    return deepest


def loads_json(text, **kwargs):
    """`json.loads` that refuses nesting deeper than MAX_DEPTH.

    Raises ``ValueError`` (a JSONDecodeError for bad syntax) with a message
    for one line; the caller adds the file and flag."""
    try:
        data = json.loads(text, **kwargs)
    except RecursionError:
        raise ValueError(f"nested deeper than {MAX_DEPTH} levels") from None
    if depth(data) > MAX_DEPTH:
        raise ValueError(f"nested deeper than {MAX_DEPTH} levels")
    return data


def load_yaml(stream, max_nodes=MAX_YAML_NODES, extra="suite"):
    """``yaml.safe_load`` of `stream`, refusing a document that would expand
    (through aliases) to more than `max_nodes` nodes or nest deeper than
    MAX_DEPTH, before anything is built from it.  Raises ``ValueError`` for
    those and ``yaml.YAMLError`` for bad syntax."""
    yaml = require("yaml", extra)

    # libyaml's parser when there: fast, and it stops deep nesting itself
    # (the pure-Python one takes seconds to reach a RecursionError)
    base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    class BoundedLoader(base):
        def get_single_node(self):
            node = super().get_single_node()
            if node is not None:
                _check_expansion(node, yaml, max_nodes)
            return node

    loader = BoundedLoader(stream)
    try:
        return loader.get_single_data()
    except RecursionError:
        raise ValueError(f"nested deeper than {MAX_DEPTH} levels") from None
    finally:
        loader.dispose()


def _check_expansion(root, yaml, max_nodes):
    """Nodes of the document rooted at `root` with every alias expanded, and
    its depth, computed on the node graph (aliases are shared nodes there)
    without expanding anything."""
    weight, deepest, open_ = {}, {}, set()
    stack = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if key in weight and not children_done:
            continue
        kids = _children(node, yaml)
        if not children_done:
            if key in open_:
                raise ValueError("an alias refers to a node that contains it")
            open_.add(key)
            stack.append((node, True))
            for k in kids:
                if id(k) in open_:
                    raise ValueError("an alias refers to a node that contains it")
                if id(k) not in weight:
                    stack.append((k, False))
            continue
        open_.discard(key)
        weight[key] = 1 + sum(weight.get(id(k), 1) for k in kids)
        deepest[key] = 1 + max((deepest.get(id(k), 1) for k in kids), default=0)
        if weight[key] > max_nodes:
            raise ValueError(f"expands to more than {max_nodes} nodes (aliases of aliases?)")
        if deepest[key] > MAX_DEPTH + 1:
            raise ValueError(f"nested deeper than {MAX_DEPTH} levels")


def _children(node, yaml):
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [x for pair in node.value for x in pair]
    return []
