"""Reading an input that comes from a JSON file or straight from Python.

The CLI passes a path; the API may pass the parsed data itself.  Errors
name the flag and, when there is one, the file.
"""
import json
import os

from ..bounded import loads_json, read_text
from ..errors import ConfigError


class Source:
    """Where an input came from, for error messages.

    Parameters
    ----------
    flag : str
        The CLI flag (or API keyword) the input was given with.
    path : str, optional
        The file it was read from.
    """

    def __init__(self, flag, path=None):
        self.flag, self.path = flag, path

    def error(self, message):
        """A `ConfigError` for `message`, naming the flag and the file."""
        where = f"{self.path}: " if self.path else ""
        return ConfigError(where + message, self.flag)


def load(value, flag):
    """(data, Source) for a path to a JSON file or already-parsed data."""
    if isinstance(value, (str, os.PathLike)):
        path = os.fspath(value)
        src = Source(flag, path)
        try:
            text = read_text(path, "a JSON input")
        except ConfigError as e:
            raise src.error(str(e).split(": ", 1)[1]) from None
        except FileNotFoundError:
            raise src.error("no such file") from None
        except (OSError, UnicodeDecodeError) as e:
            reason = getattr(e, "strerror", None) or f"{e.__class__.__name__}: {e}"
            raise src.error(f"cannot read it ({reason})") from None
        try:
            return loads_json(text), src
        except json.JSONDecodeError as e:
            raise src.error(f"not valid JSON: {e.msg} at line {e.lineno}, "
                            f"column {e.colno}") from None
        except ValueError as e:
            raise src.error(f"not a JSON input the kit takes: {e}") from None
    return value, Source(flag)


def load_keyed(value, flag, key, what):
    """(data, Source) like `load`, taking ``data[key]`` out of an object.

    A bare value (no object around it) is accepted as well; `what` describes
    the value for the error when the object lacks `key`.
    """
    data, src = load(value, flag)
    if isinstance(data, dict):
        if key not in data:
            raise src.error(f"expected a {key!r} key holding {what}, found keys {sorted(data)}")
        data = data[key]
    return data, src


def is_int(v):
    """A JSON integer (bools are ints in Python, but not ranks or counts)."""
    return isinstance(v, int) and not isinstance(v, bool)
