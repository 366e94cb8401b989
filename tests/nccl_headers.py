"""Unpack the include folder of an nvidia-nccl wheel (`make nccl-headers`).

    python tests/nccl_headers.py WHEEL DEST

Only ``nvidia/nccl/include/`` is written, under DEST: the headers the
device-API kernels compile with (tests/test_gpu_kernels.py), not the library.
"""
import os
import sys
import zipfile

PREFIX = "nvidia/nccl/include/"


def main(wheel, dest):
    with zipfile.ZipFile(wheel) as z:
        for name in z.namelist():
            if not name.startswith(PREFIX) or name.endswith("/"):
                continue
            path = os.path.join(dest, name[len(PREFIX):])
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as f:
                f.write(z.read(name))


if __name__ == "__main__":
    main(*sys.argv[1:])
