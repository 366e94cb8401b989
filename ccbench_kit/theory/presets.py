"""Hardware presets: link peaks and typical latencies, each with its source.

The built-in presets live in ``presets.toml`` beside this module.  Users add
their own in TOML or YAML files of the same shape, found in this order (later
files override earlier names):

1. the built-ins;
2. ``~/.config/ccbench/presets.toml`` (or ``$XDG_CONFIG_HOME/ccbench/``);
3. every file in ``$CCBENCH_PRESETS`` (``os.pathsep``-separated);
4. files passed as `paths`, or named in ``"FILE#NAME"``.

Files are parsed with ``tomllib`` or ``yaml.safe_load``: data only, never code.
"""
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
import socket


from ..errors import ConfigError
from .. import hostinfo
from ..bounded import load_yaml, read_text
from ..collectives import get as collective_of

BUILTIN = Path(__file__).with_name("presets.toml")
ENV = "CCBENCH_PRESETS"
_FIELDS = ("peak_gbps", "alpha_us", "scope", "description", "source", "aliases", "kind",
           "switch_reduction")
# a GPU's own figures (the doctor's GPU checks, `gpu_figures`): datasheet
# peaks and the typical healthy measurement, each kept in `Preset.extra`
GPU_FIELDS = ("gpu_model", "hbm_gbps", "hbm_typical_gbps", "matmul_tflops",
              "matmul_typical_tflops", "pcie_gbps", "pcie_typical_gbps", "gpu_source",
              "peer_gbps", "peer_source")

GPU_TEXT = ("gpu_model", "gpu_source", "peer_source")


@dataclass(frozen=True)
class Preset:
    """One link: `peak_gbps` bounds busbw (GB/s = 1e9 B/s, per rank, per direction)."""

    name: str
    peak_gbps: float
    alpha_us: float = 0.0
    scope: str = ""
    description: str = ""
    source: str = ""
    aliases: tuple = ()
    kind: str = "fixed"      # "memcpy": peak measured at run time
    switch_reduction: str = ""  # "NVLS", "SHARP": the switch reduces (see `busbw_bound`)
    origin: str = ""         # the file it came from
    measured: str = ""       # how and where a run-time peak was measured
    extra: dict = field(default_factory=dict, compare=False)

    @property
    def alpha(self):
        """Per-message latency in seconds."""
        return self.alpha_us * 1e-6

    @property
    def beta(self):
        """Seconds per byte, 1 / peak."""
        return 1.0 / (self.peak_gbps * 1e9)

    @property
    def has_peak(self):
        """False for a ``memcpy`` preset whose run recorded no rate."""
        return self.peak_gbps > 0

    def label(self):
        return f"{self.name} peak {self.peak_gbps:.4g} GB/s"


def _user_files():
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    files = [os.path.join(base, "ccbench", name) for name in ("presets.toml", "presets.yaml")]
    files = [f for f in files if os.path.exists(f)]
    files += [f for f in os.environ.get(ENV, "").split(os.pathsep) if f]
    return files


def _parse(path):
    path = os.fspath(path)
    if not os.path.exists(path):
        raise ConfigError(f"{path}: no such presets file", "theory")
    try:
        if path.endswith((".yaml", ".yml")):
            data = load_yaml(read_text(path, "a presets file"), extra="report") or {}
        else:
            import tomllib  # lazy: tomllib is Python >= 3.11; requires-python is 3.10
            with open(path, "rb") as f:
                data = tomllib.load(f)
    except ConfigError:
        raise
    except Exception as e:  # tomllib.TOMLDecodeError, yaml.YAMLError
        raise ConfigError(f"{path}: cannot read presets ({e})", "theory") from e
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a presets file maps names to tables", "theory")
    return data


def _make(name, entry, origin):
    if not isinstance(entry, dict):
        raise ConfigError(f"{origin}: preset {name!r} must be a table of fields", "theory")
    unknown = set(entry) - set(_FIELDS) - set(GPU_FIELDS)
    if unknown:
        raise ConfigError(f"{origin}: preset {name!r} has unknown field(s) "
                          f"{', '.join(sorted(unknown))}; fields are "
                          f"{', '.join(_FIELDS + GPU_FIELDS)}", "theory")
    kind = str(entry.get("kind", "fixed"))
    if kind not in ("fixed", "memcpy"):
        raise ConfigError(f"{origin}: preset {name!r}: kind must be fixed or memcpy", "theory")
    peak = entry.get("peak_gbps")
    if kind == "fixed":
        if not isinstance(peak, (int, float)) or isinstance(peak, bool) or peak <= 0:
            raise ConfigError(f"{origin}: preset {name!r} needs peak_gbps > 0 (GB/s)", "theory")
    alpha = entry.get("alpha_us", 0.0)
    if not isinstance(alpha, (int, float)) or isinstance(alpha, bool) or alpha < 0:
        raise ConfigError(f"{origin}: preset {name!r}: alpha_us must be a number ≥ 0 (µs)", "theory")
    gpu = {k: entry[k] for k in GPU_FIELDS if k in entry}
    for k, v in gpu.items():
        ok = isinstance(v, str) if k in GPU_TEXT else \
            isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0
        if not ok:
            raise ConfigError(f"{origin}: preset {name!r}: {k} must be "
                              f"{'text' if k in GPU_TEXT else 'a number > 0'}",
                              "theory")
    return Preset(name=str(name), peak_gbps=float(peak or 0.0), alpha_us=float(alpha),
                  extra=gpu,
                  scope=str(entry.get("scope", "")), description=str(entry.get("description", "")),
                  source=str(entry.get("source", "")),
                  aliases=tuple(str(a) for a in entry.get("aliases", ())), kind=kind,
                  switch_reduction=str(entry.get("switch_reduction", "")), origin=str(origin))


def load_file(path):
    """{name: Preset} from one TOML or YAML file."""
    return {str(k): _make(k, v, path) for k, v in _parse(path).items()}


def available(paths=()):
    """{name: Preset}: built-ins, then user files, then `paths` (later wins)."""
    out = {}
    for f in [BUILTIN, *_user_files(), *paths]:
        out.update(load_file(f))
    return out


def _key(name):
    return str(name).strip().lower().replace("_", "-")


def get(name, paths=(), ds=None, flag="theory"):
    """The preset called `name` (or an alias; ``"FILE#NAME"`` reads FILE too).

    A ``memcpy`` preset ("cpu") takes the rate the run recorded in the
    Dataset's ``memcpy_gbps`` attr; a Dataset without one gets no peak
    (``has_peak`` False); with no Dataset, this host's memcpy is measured.

    Raises
    ------
    ConfigError
        Naming `flag` and listing the presets there are.
    """
    if isinstance(name, Preset):
        return name
    found = lookup(name, paths, flag)
    if found.kind == "memcpy":
        found = _with_memcpy(found, ds)
    return found


def lookup(name, paths=(), flag="theory"):
    """The preset called `name` as written in its file (a ``memcpy`` preset
    not yet measured); `get` without the measurement."""
    text = str(name)
    paths = list(paths)
    if "#" in text:
        file, text = text.rsplit("#", 1)
        paths.append(file)
    presets = available(paths)
    key = _key(text)
    found = None
    for p in reversed(list(presets.values())):  # user files override built-ins
        if _key(p.name) == key or key in (_key(a) for a in p.aliases):
            found = p
            break
    if found is None:
        raise ConfigError(f"unknown theory preset {name!r}; choose one of "
                          f"{', '.join(presets)} or add yours to a presets file "
                          f"(${ENV})", flag)
    return found


NOT_RECORDED = "peak not recorded: the run that wrote this file did not measure memcpy"


def _with_memcpy(preset, ds):
    """The run's recorded memcpy rate as the peak.  A Dataset without one
    (files from before runs recorded it) gets no peak (`peak_gbps` 0 and
    `measured` saying so): measuring now would make the report depend on
    where and when it is rendered.  Without a Dataset, this host is
    measured now, and `measured` says so."""
    if ds is not None:
        recorded = ds.attrs.get("memcpy_gbps")
        if recorded:
            how = ds.attrs.get("memcpy_method") or "memcpy recorded by the run"
            return replace(preset, peak_gbps=float(recorded), measured=str(how))
        return replace(preset, peak_gbps=0.0, measured=NOT_RECORDED)
    rate = measure_memcpy_gbps()
    return replace(preset, peak_gbps=rate,
                   measured=f"memcpy measured now on {socket.gethostname()} (no run given)")


def gpu_preset(device_name, paths=()):
    """The preset whose `gpu_model` is in `device_name` (NVML's name, e.g.
    'NVIDIA H100 80GB HBM3'; the longest match wins), or None."""
    hits = [p for p in available(paths).values()
            if p.extra.get("gpu_model") and p.extra["gpu_model"].lower() in device_name.lower()]
    return max(hits, key=lambda p: len(p.extra["gpu_model"])) if hits else None


def measure_memcpy_gbps(nbytes=None, repeats=None):
    """This host's memcpy rate in GB/s (1e9 B/s): `hostinfo.measure_memcpy_gbps`."""
    return hostinfo.measure_memcpy_gbps(nbytes or hostinfo.MEMCPY_BYTES,
                                        repeats or hostinfo.MEMCPY_REPEATS)


def busbw_bound(preset, collective, nranks):
    """The busbw (GB/s) no algorithm can pass on `preset`'s links, and why.

    Built from point-to-point messages, every algorithm's busbw is at most
    the per-direction link rate B (the lower bounds in docs/theory.md).  With in-switch
    reduction (NVLink SHARP, "NVLS", on NVSwitch; SHARP on InfiniBand) an
    all_reduce sends each byte up once and receives the result once, so
    its time approaches S/B and busbw = algbw·2(p−1)/p approaches
    2(p−1)/p·B: busbw above B is then expected, not an error.

    Returns (bound in GB/s, one-line reason).
    """
    coll = collective_of(collective)
    if preset.switch_reduction and coll.name == "all_reduce" and nranks > 1:
        factor = coll.bus_factor(nranks)  # 2(p-1)/p: the registry's
        return preset.peak_gbps * factor, (
            f"with {preset.switch_reduction} the switch reduces: each GPU sends its buffer once "
            f"and receives the sum once, so all_reduce busbw can reach 2(p−1)/p × B = "
            f"{factor:.3g} × {preset.peak_gbps:.4g} = {preset.peak_gbps * factor:.4g} GB/s")
    return preset.peak_gbps, "point-to-point algorithms cannot pass the per-direction link rate B"


def efficiency(busbw, preset):
    """Measured busbw (GB/s) / the preset's peak: a fraction (1.0 = the peak)."""
    return busbw / get(preset).peak_gbps
