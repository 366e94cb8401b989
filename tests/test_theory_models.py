"""α-β(-γ) models: hand-computed costs, and no model beats the lower bound."""
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ccbench_kit import collectives
from ccbench_kit.errors import ConfigError
from ccbench_kit.theory import cost, has_model, lower_bound, predict_time
from ccbench_kit.theory.models import MODELS, best_segments

A, B, G = 5e-6, 1e-10, 2e-11
MiB = 1 << 20


def test_ring_all_reduce_by_hand():
    # 2(p-1)α + 2(p-1)/p nβ + (p-1)/p nγ at p = 4
    want = 6 * A + 1.5 * MiB * B + 0.75 * MiB * G
    assert predict_time("all_reduce", "ring", MiB, 4, A, B, G) == pytest.approx(want, rel=1e-12)
    assert predict_time("allr", "ring", MiB, 4, A, B, G) == pytest.approx(want, rel=1e-12)


def test_recursive_doubling_non_power_of_two_folds_extra_ranks():
    # p = 5: 2 exchange steps on 4 ranks + fold in and out (2 steps, 2n), 3 reductions of n
    c = cost("all_reduce", "recursive_doubling", 1000, 5)
    assert (float(c.latency), float(c.bandwidth), float(c.reduction)) == (4.0, 4000.0, 3000.0)
    c8 = cost("all_reduce", "recursive_doubling", 1000, 8)
    assert (float(c8.latency), float(c8.bandwidth), float(c8.reduction)) == (3.0, 3000.0, 3000.0)


def test_rabenseifner_power_of_two_matches_theory():
    p, n = 8, 3 * MiB
    want = 2 * 3 * A + 2 * (7 / 8) * n * B + (7 / 8) * n * G
    assert predict_time("all_reduce", "rabenseifner", n, p, A, B, G) == pytest.approx(want)


def test_bruck_alltoall_counts_blocks_exactly():
    # p = 8: lg p = 3 steps of n/2 each (docs/theory.md)
    assert predict_time("alltoall", "bruck", MiB, 8, A, B) == pytest.approx(3 * A + 1.5 * MiB * B)
    # p = 5: blocks 1,3 | 2,3 | 4 -> 5 blocks of n/5 = n over 3 steps
    c = cost("alltoall", "bruck", 1000, 5)
    assert (float(c.latency), float(c.bandwidth)) == (3.0, 1000.0)


def test_all_gather_and_gather_family():
    n, p = 6 * MiB, 6
    assert predict_time("all_gather", "ring", n, p, A, B) == pytest.approx(5 * A + n * 5 / 6 * B)
    assert predict_time("all_gather", "bruck", n, p, A, B) == pytest.approx(3 * A + n * 5 / 6 * B)
    assert predict_time("gather", "linear", n, p, A, B) == pytest.approx(5 * A + n * 5 / 6 * B)
    assert predict_time("scatter", "binomial", n, p, A, B) == pytest.approx(3 * A + n * 5 / 6 * B)


def test_alltoallv_and_hypercube():
    # alltoallv: n = the largest rank's total, all to others; hypercube: the lower bound
    assert predict_time("alltoallv", "pairwise", MiB, 5, A, B) == pytest.approx(4 * A + MiB * B)
    assert predict_time("hypercube", "recursive_doubling", MiB, 8, A, B) == pytest.approx(
        lower_bound("hypercube", MiB, 8, A, B))


def test_every_engine_algorithm_has_a_model():
    from ccbench_kit.backends import backend_algorithms
    for coll in collectives.NAMES:
        for alg in backend_algorithms("mpi", coll):
            assert alg == "mpi" or has_model(coll, alg), (coll, alg)


def test_broadcast_chain_segments():
    n, p = 64 * MiB, 5
    # explicit: (p + k - 2)(α + nβ/k)
    assert predict_time("broadcast", "chain", n, p, A, B, segments=16) == \
        pytest.approx(19 * (A + n * B / 16))
    assert predict_time("broadcast", "chain", n, p, A, B, segment_bytes=MiB) == \
        pytest.approx(67 * (A + n * B / 64))
    # the default picks the best integer k
    k = int(best_segments(n, p, A, B))
    ts = [predict_time("broadcast", "chain", n, p, A, B, segments=j) for j in (k - 1, k, k + 1)]
    assert ts[1] == min(ts)
    assert predict_time("broadcast", "chain", n, p, A, B) == pytest.approx(ts[1])


def test_nccl_protocols_scale_bandwidth_only():
    simple = cost("all_reduce", "nccl:ring/simple", MiB, 8)
    ll = cost("all_reduce", "nccl:ring/ll", MiB, 8)
    assert float(ll.latency) == float(simple.latency) == 14
    assert float(ll.bandwidth) == pytest.approx(2 * float(simple.bandwidth))
    tree = cost("all_reduce", "nccl:tree", MiB, 8)
    assert (float(tree.latency), float(tree.bandwidth)) == (6.0, 2.0 * MiB)


def test_vectorised_over_sizes():
    sizes = np.array([8, 1024, MiB])
    t = predict_time("reduce_scatter", "ring", sizes, 3, A, B, G)
    assert t.shape == (3,)
    assert t[2] == pytest.approx(2 * A + MiB * 2 / 3 * (B + G))


def test_unknown_names_raise_config_errors():
    with pytest.raises(ConfigError, match="no α-β model for all_reduce algorithm 'mpi'"):
        predict_time("all_reduce", "mpi", 8, 4, A, B)
    with pytest.raises(ConfigError, match="unknown NCCL protocol 'xx'"):
        cost("all_reduce", "nccl:ring/xx", 8, 4)
    with pytest.raises(ConfigError, match="rank count"):
        cost("all_reduce", "ring", 8, 0)
    assert not has_model("all_reduce", "mpi") and has_model("allreduce", "nccl:ring/ll128")


def test_one_rank_costs_nothing():
    assert predict_time("all_reduce", "ring", MiB, 1, A, B, G) == 0.0


_BOUNDED = [(c, a) for c in MODELS for a in MODELS[c] if c in collectives.NAMES]


@pytest.mark.parametrize("coll,alg", _BOUNDED)
@settings(max_examples=40, deadline=None)
@given(p=st.integers(2, 70), n=st.integers(1, 1 << 32),
       alpha=st.floats(1e-8, 1e-4), beta=st.floats(1e-12, 1e-8), gamma=st.floats(0, 1e-9))
def test_no_model_beats_the_lower_bound(coll, alg, p, n, alpha, beta, gamma):
    t = predict_time(coll, alg, n, p, alpha, beta, gamma)
    assert t >= lower_bound(coll, n, p, alpha, beta, gamma) * (1 - 1e-12)
    assert math.isfinite(t)
