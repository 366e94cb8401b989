"""The line protocol between ranks and the launcher: JSON after a marker on
stdout, so progress and errors survive mpirun's forwarding."""
import json
import sys

MARKER = "@@ccbench "


def emit(event, stream=None):
    stream = stream or sys.stdout
    stream.write(MARKER + json.dumps(event) + "\n")
    stream.flush()


def parse(line):
    """The event in `line`, or None for ordinary output."""
    i = line.find(MARKER)  # mpirun may prefix lines with [1,0]<stdout>:
    if i < 0:
        return None
    try:
        return json.loads(line[i + len(MARKER):])
    except ValueError:
        return None
