"""Sizes as nccl-tests and nccom-test write them, and sweeps."""
import pytest
from hypothesis import given, settings, strategies as st

from ccbench_kit.errors import ConfigError
from ccbench_kit.units import format_size, parse_size, sweep


@pytest.mark.parametrize("text,expected", [
    ("8", 8), ("1K", 1024), ("1k", 1024), ("64M", 64 << 20), ("1G", 1 << 30),
    ("1kb", 1024), ("2kb", 2048), ("1MB", 1 << 20), ("4GiB", 4 << 30), ("1.5K", 1536),
    (" 32M ", 32 << 20), (4096, 4096),
])
def test_parse_size(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["12XB", "", "K", "-8", "1.3", "8 bytes", "0x10"])
def test_parse_size_rejects(text):
    with pytest.raises(ConfigError, match=r"^-b/--minbytes: "):
        parse_size(text, "-b/--minbytes")


def test_sweep_factor_and_step():
    assert sweep("8", "64", stepfactor=2) == [8, 16, 32, 64]
    assert sweep("8", "16", stepbytes=4) == [8, 12, 16]
    assert sweep("1K", "1K") == [1024]
    assert sweep(8, 100, stepfactor="4") == [8, 32]
    # nccom-test's default step is (max - min) / 10
    assert sweep(0, 100) == list(range(0, 101, 10))


def test_sweep_errors_name_the_flag():
    with pytest.raises(ConfigError, match=r"-b/--minbytes: minimum size 1 GiB is larger than -e/--maxbytes 1 KiB"):
        sweep("1G", "1K")
    with pytest.raises(ConfigError, match=r"-f/--stepfactor: step factor must be > 1"):
        sweep("8", "64", stepfactor=1)


def test_format_size():
    assert [format_size(s) for s in (8, 1024, 3 << 20, 1 << 30, 1000)] == \
        ["8 B", "1 KiB", "3 MiB", "1 GiB", "1000 B"]


@settings(max_examples=500, deadline=None)
@given(st.text(max_size=12))
def test_parse_size_fuzz(text):
    """Any text is a size or a ConfigError, never another exception."""
    try:
        v = parse_size(text, "-b/--minbytes")
    except ConfigError as e:
        assert str(e).startswith("-b/--minbytes: ")
    else:
        assert isinstance(v, int) and v >= 0


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 1 << 40), st.sampled_from(["", "K", "M", "G", "kb", "MB", "GiB"]))
def test_parse_size_units_roundtrip(n, unit):
    scale = {"": 1, "K": 1024, "M": 1 << 20, "G": 1 << 30, "kb": 1024, "MB": 1 << 20, "GiB": 1 << 30}
    assert parse_size(f"{n}{unit}") == n * scale[unit]


def test_sweep_refuses_absurd_size_counts():
    with pytest.raises(ConfigError, match=r"^-i/--stepbytes: the sweep would run more than 4096 sizes"):
        sweep(0, "1T", stepbytes=1)
    with pytest.raises(ConfigError, match=r"^-f/--stepfactor: the sweep would run more than 4096 sizes"):
        sweep(1, "1T", stepfactor="1.0000001")
