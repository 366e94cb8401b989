"""The kit's own GPU algorithms: kernels on peer memory, beside NCCL's.

One algorithm is two files in this folder: ``NAME.cu`` (the kernel, a
``template <class E, class W> __device__ void NAME(const KArgs &)`` and the
line ``CCB_KERNELS(NAME)`` that makes its fp32/fp16/bf16 entries, an element
or 16 bytes a word) and ``NAME.py`` (``COLLECTIVE``, the algorithm's name
``NAME`` in ``--algorithms``, ``SOURCE``, and two functions:
``staging_elems(count, nranks)``, the elements of each half of a rank's
staging buffer, and ``parallel_elems(count, nranks)``, the elements the
blocks stride over; optionally ``STAGE``, a staging buffer of its own, as
the LL kernels need).  Nothing else is edited: this package
finds every module here (``_*`` modules aside) and the nccl backend lists
their names after NCCL's for their collective.  docs/architecture.md shows
a worked example.

The kernels are compiled at run time by NVRTC (`_nvrtc`) and cached per GPU
architecture, so the package imports, installs and lists its algorithms on
machines without CUDA; peer memory and the launches are `_peers`'.

Kernels on NCCL's device API (nccl-tests' ``-D``) are two files too:
``NAME.cu`` includes ``devapi.cuh`` and ends with ``CCB_DEVAPI_KERNELS(NAME)``
(a ``template <class E> __device__ void NAME(const DArgs &)``), ``NAME.py``
says ``API = "nccl-device"`` and its ``DEVICE_IMPLEMENTATION``; nvcc
compiles them and `_devapi` runs them on the run's symmetric windows.
"""
from ._nvrtc import NvrtcError, image, load as load_nvrtc  # noqa: F401  (the doctor's SM kernels)
from ._devapi import DevApiKernels  # noqa: F401
from ._peers import PeerKernels  # noqa: F401
from ._registry import (  # noqa: F401
    ELEMENT_TYPES, OPS, PHASES, all_algorithms, find, is_devapi, kernel_name, names_for,
    phase_algorithms)
