"""The list of collectives, read from ``collectives.def`` beside this file:
the one place that names each collective, gives its order (the engine's and
the NCCL loop's ids) and says how the nccl backend runs it.  The C side
includes the same file as an X-macro (ext/registry.c, ext/nccl_api.h,
ext/nccl_loop.c); it ships as package data, so an installed kit reads it
too.  Parsed as text (one ``CCB_COLL(ID, name, NCCL)`` per line), never run."""
import re
from pathlib import Path

DEF_FILE = Path(__file__).with_name("collectives.def")
# the NCCL cases a line may give, as `Collective.nccl` spells them; NONE: no
# NCCL form (the nccl backend refuses the collective)
NCCL_CASES = {"NATIVE": "native", "NATIVE_SINCE_2_28": "native_since_2_28", "P2P": "p2p",
              "NONE": None}
_LINE = re.compile(r"^CCB_COLL\(\s*(\w+)\s*,\s*(\w+)\s*,\s*(\w+)\s*\)\s*$")


def read_def(text):
    """[(ID, name, nccl case)] of the ``CCB_COLL`` lines of `text`, in order;
    ValueError names a line that is not one, or an ID that is not NAME upper-cased."""
    rows = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.startswith("CCB_COLL"):
            continue
        m = _LINE.match(line)
        if not m or m.group(3) not in NCCL_CASES or m.group(1) != m.group(2).upper():
            raise ValueError(f"{DEF_FILE.name}:{number}: not CCB_COLL(NAME, name, "
                             f"{'|'.join(NCCL_CASES)}): {line!r}")
        rows.append((m.group(1), m.group(2), NCCL_CASES[m.group(3)]))
    return rows


ROWS = tuple(read_def(DEF_FILE.read_text()))
NAMES = tuple(name for _, name, _ in ROWS)
NCCL = {name: case for _, name, case in ROWS}
