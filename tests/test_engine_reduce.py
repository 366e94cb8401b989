"""The engine's local reductions (ext/reduce.c) against numpy, bit for bit.

fp16 and bf16 combine through float32 and round to nearest even; integers
wrap around; avg divides the sum, truncating integers toward zero; min and
max propagate NaN.  No MPI needed: `_engine.reduce_local` is ccb_reduce3.
"""
import numpy as np
import pytest

from ccbench_kit.collectives.base import reduce_arrays
from ccbench_kit.dtypes import DTYPES, OPS, get_dtype


@pytest.fixture(scope="module")
def engine():
    import mpi4py
    mpi4py.rc.initialize = False
    from ccbench_kit.backends.mpi import engine
    return engine()


NUMPY = {"sum": np.add, "prod": np.multiply, "min": np.minimum, "max": np.maximum}


def bf16_nearest_even(f32):
    """float32 -> bf16 bits by comparing distances in float64 (independent
    of the engine's bit trick)."""
    f32 = np.asarray(f32, np.float32)
    bits = f32.view(np.uint32)
    lo = bits & np.uint32(0xFFFF0000)
    hi = lo + np.uint32(0x10000)
    flo = lo.view(np.float32).astype(np.float64)
    huge = (hi & np.uint32(0x7FFFFFFF)) == 0x7F800000  # the step past the largest finite
    fhi = np.where(huge, np.copysign(2.0 ** 128, f32.astype(np.float64)),
                   hi.view(np.float32).astype(np.float64))
    with np.errstate(invalid="ignore"):
        v = f32.astype(np.float64)
        dlo, dhi = np.abs(v - flo), np.abs(fhi - v)
    up = (dhi < dlo) | ((dhi == dlo) & ((lo >> 16) & 1 == 1))
    out = np.where(up, hi, lo) >> 16
    out = np.where(np.isnan(f32), (bits >> 16) | 0x40, out)
    return out.astype(np.uint16)


def as_f32(bf16_bits):
    return (np.asarray(bf16_bits, np.uint32) << 16).view(np.float32)


def same_fp16(got, want):
    """Bitwise equal, or both NaN."""
    return (got.view(np.uint16) == want.view(np.uint16)) | (np.isnan(got) & np.isnan(want))


def test_fp16_rounds_every_value_like_numpy(engine):
    every = np.arange(1 << 16, dtype=np.uint16).view(np.float16)
    rng = np.random.default_rng(0)
    x = rng.integers(0, 1 << 16, 400_000, dtype=np.uint16).view(np.float16)
    y = rng.integers(0, 1 << 16, 400_000, dtype=np.uint16).view(np.float16)
    code = DTYPES["fp16"].engine
    with np.errstate(all="ignore"):
        # every bit pattern through float32 and back, incl. subnormals, inf, nan
        got = engine.reduce_local(every, np.zeros_like(every), code, OPS["sum"])
        assert same_fp16(got, (every.astype(np.float32) + np.float32(0)).astype(np.float16)).all()
        for op, f in NUMPY.items():
            got = engine.reduce_local(x, y, code, OPS[op])
            want = f(x.astype(np.float32), y.astype(np.float32)).astype(np.float16)
            assert same_fp16(got, want).all(), op


def test_bf16_rounds_to_nearest_even(engine):
    rng = np.random.default_rng(1)
    x = rng.integers(0, 1 << 16, 400_000, dtype=np.uint16)
    y = rng.integers(0, 1 << 16, 400_000, dtype=np.uint16)
    code = DTYPES["bf16"].engine
    with np.errstate(all="ignore"):
        for op, f in NUMPY.items():
            got = engine.reduce_local(x, y, code, OPS[op])
            want = bf16_nearest_even(f(as_f32(x), as_f32(y)))
            nan = np.isnan(as_f32(got)) & np.isnan(as_f32(want))
            assert ((got == want) | nan).all(), op
    # ties: 1 + 2^-8 is halfway between two bf16 values; even mantissa wins
    one, tiny = np.uint16(0x3F80), np.uint16(0x3B80)  # 1.0, 2^-8
    assert engine.reduce_local(np.array([one]), np.array([tiny]), code, OPS["sum"])[0] == 0x3F80
    # the largest finite value plus half a step rounds to infinity
    big = np.array([0x7F7F], np.uint16)
    half_step = np.array([0x7B00], np.uint16)  # 2^119, half of bf16's step at 2^127
    assert engine.reduce_local(big, half_step, code, OPS["sum"])[0] == 0x7F80


@pytest.mark.parametrize("name", [n for n, d in DTYPES.items() if not d.is_float])
def test_integers_wrap_and_avg_truncates(engine, name):
    dt = get_dtype(name)
    info = np.iinfo(dt.storage)
    x = np.array([info.max, info.min, 7, -7 if info.min < 0 else 9, 3, info.max], dt.storage)
    y = np.array([1, info.min, 5, 2, 3, info.max], dt.storage)
    with np.errstate(over="ignore"):
        for op in ("sum", "prod", "min", "max", "avg"):
            got = engine.reduce_local(x, y, dt.engine, OPS[op], 2)
            want = reduce_arrays(np.stack([x, y]), op, dt)
            np.testing.assert_array_equal(got, want, err_msg=op)
    # C's wrap-around, by hand
    assert engine.reduce_local(x[:1], y[:1], dt.engine, OPS["sum"])[0] == info.min
    if info.min < 0:  # -7 + 2 = -5, avg over 2 ranks: -2 (toward zero, not -3)
        assert engine.reduce_local(x[3:4], y[3:4], dt.engine, OPS["avg"], 2)[0] == -2


@pytest.mark.parametrize("name", ["fp32", "fp64", "fp16"])
def test_float_ops_and_nan(engine, name):
    dt = get_dtype(name)
    x = np.array([1.5, -2.0, np.nan, 3.0, np.inf], dt.storage)
    y = np.array([2.25, 4.0, 1.0, np.nan, 1.0], dt.storage)
    with np.errstate(invalid="ignore"):
        for op, f in NUMPY.items():
            got = engine.reduce_local(x, y, dt.engine, OPS[op])
            np.testing.assert_array_equal(got, f(x, y), err_msg=op)  # NaN == NaN here
        got = engine.reduce_local(x, y, dt.engine, OPS["avg"], 4)
        np.testing.assert_array_equal(got, (x + y) / dt.storage.type(4))


# fp8 (OCP 8-bit floats, NCCL's ncclFloat8e4m3/e5m2): values from the spec
FP8_KNOWN = {
    "fp8_e4m3": {0x38: 1.0, 0x7E: 448.0, 0x08: 2.0 ** -6, 0x01: 2.0 ** -9, 0xB8: -1.0,
                 0x39: 1.125, 0x77: 240.0},
    "fp8_e5m2": {0x3C: 1.0, 0x7B: 57344.0, 0x04: 2.0 ** -14, 0x01: 2.0 ** -16, 0xBC: -1.0,
                 0x3D: 1.25, 0x7C: np.inf, 0xFC: -np.inf},
}


@pytest.mark.parametrize("name", ["fp8_e4m3", "fp8_e5m2"])
def test_fp8_values_rounding_and_saturation(name):
    d = get_dtype(name)
    for code, value in FP8_KNOWN[name].items():
        assert d.to_float(np.uint8(code)) == value, hex(code)
    nans = np.isnan(d.to_float(np.arange(256, dtype=np.uint8)))
    assert nans.sum() == (2 if name == "fp8_e4m3" else 6)
    step = 2.0 ** -(3 if name == "fp8_e4m3" else 2)  # between 1 and 2
    # ties go to the even code; past the largest finite (and inf) saturate
    assert d.to_float(d.from_float([1 + step / 2, 1 + 1.5 * step])).tolist() == [1.0, 1 + 2 * step]
    top = FP8_KNOWN[name][0x7E if name == "fp8_e4m3" else 0x7B]
    assert d.to_float(d.from_float([top * 1.01, 1e30, -np.inf])).tolist() == [top, top, -top]
    assert np.isnan(d.to_float(d.from_float([np.nan])))[0]


@pytest.mark.parametrize("name", ["fp8_e4m3", "fp8_e5m2"])
def test_fp8_every_pair_like_numpy(engine, name):
    """All 65,536 pairs, each op: the engine combines in float32 and rounds
    to nearest even like the host golden results; signed zeros may differ
    (min/max of -0 and 0), NaN must stay NaN."""
    d = get_dtype(name)
    a, b = (x.ravel().copy() for x in np.meshgrid(np.arange(256, dtype=np.uint8),
                                                  np.arange(256, dtype=np.uint8)))
    fa, fb = d.to_float(a).astype(np.float32), d.to_float(b).astype(np.float32)
    for op, f in NUMPY.items():
        with np.errstate(all="ignore"):
            want = d.to_float(d.from_float(f(fa, fb).astype(np.float64)))
        got = d.to_float(engine.reduce_local(a, b, d.engine, OPS[op]))
        same = (got == want) | (np.isnan(got) & np.isnan(want))
        assert same.all(), (op, a[~same][:5], b[~same][:5], got[~same][:5], want[~same][:5])
    # avg of three ranks: the sum divided once, rounded once
    x = d.from_float([3.0, 1.5, -6.0])
    got = d.to_float(engine.reduce_local(x, x, d.engine, OPS["avg"], nranks=3))
    assert got.tolist() == d.to_float(d.from_float([2.0, 1.0, -4.0])).tolist()


@pytest.mark.parametrize("name,p,caught", [("fp8_e4m3", 3, 1.0), ("fp8_e4m3", 5, 0.1),
                                           ("fp8_e5m2", 3, 0.5)])
def test_fp8_check_tolerates_rounding_and_catches_a_lost_rank(name, p, caught):
    """--check on fp8: any order of rounded sums passes; a rank's data lost
    or added twice fails (on every element for e4m3 at 3 ranks; fp8's 2-3
    mantissa bits legitimately lose as much at more ranks, so fewer there,
    and none for e5m2 at 5)."""
    from ccbench_kit import checks, collectives
    d, coll = get_dtype(name), collectives.get("all_reduce")
    inputs = [checks.make_input(d, 1000, r, "random", 7) for r in range(p)]
    golden, scale = checks.expected(coll, inputs, 0, p, "sum", 0, d)

    def chain(xs):  # a ring's order of rounded sums
        acc = xs[0]
        for x in xs[1:]:
            acc = d.from_float(d.to_float(acc) + d.to_float(x))
        return acc

    for order in (inputs, inputs[::-1], inputs[1:] + inputs[:1]):
        assert checks.count_wrong(chain(order), golden, d, "sum", p, scale) == 0
    assert checks.count_wrong(chain(inputs[:-1]), golden, d, "sum", p, scale) >= caught * 1000
    assert checks.count_wrong(chain(inputs + inputs[:1]), golden, d, "sum", p, scale) >= caught * 1000
