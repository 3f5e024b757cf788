"""tests/io/interop.py: the Python side of tests/io/test_interop_python.c.

Uses the reference implementation (the `safetensors` package, numpy API) to write a file that cuttle
must read, and to read and check a file that cuttle wrote. Both sides compute the same values from
the same formula, so neither needs the other's output to know what to expect.

  python3 interop.py write PATH   write the reference file
  python3 interop.py check PATH   load PATH with safetensors and check every tensor and the metadata
Exit status 0 when everything matches; a message on stderr otherwise.
"""
import sys

import numpy as np
from safetensors.numpy import load_file, save_file

# name -> numpy dtype; shapes are (2, 3, 4) except "scalar" (0-dim) and "empty" (0, 5).
# bfloat16 is left out: numpy has no such dtype.
DTYPES = {
    "f64": np.float64,
    "f32": np.float32,
    "f16": np.float16,
    "i64": np.int64,
    "i32": np.int32,
    "u8": np.uint8,
    "bool": np.bool_,
}
METADATA = {"written_by": "interop.py", "note": "\u00fcnicode"}


def values(name, dtype):
    """Element i of tensor `name` is f(i), the same formula as expected_value() in the C test."""
    i = np.arange(24, dtype=np.float64)
    if dtype == np.bool_:
        v = (i.astype(np.int64) % 3) == 1
    elif np.issubdtype(dtype, np.floating):
        v = (i - 11.5) * 0.25
    elif dtype == np.uint8:
        v = (i * 11) % 256
    else:
        v = (i - 12) * 1000003
    return np.asarray(v).astype(dtype).reshape(2, 3, 4)


def tensors():
    t = {name: values(name, dt) for name, dt in DTYPES.items()}
    t["scalar"] = np.array(2.5, dtype=np.float32)
    t["empty"] = np.zeros((0, 5), dtype=np.float32)
    return t


def main():
    mode, path = sys.argv[1], sys.argv[2]
    want = tensors()
    if mode == "write":
        save_file(want, path, metadata=METADATA)
        return 0
    got = load_file(path)
    if set(got) != set(want):
        print(f"names differ: {sorted(got)} vs {sorted(want)}", file=sys.stderr)
        return 1
    for name, w in want.items():
        g = got[name]
        if g.dtype != w.dtype or g.shape != w.shape or not np.array_equal(g, w):
            print(f"{name}: got {g.dtype} {g.shape} {g.ravel()[:6]}, want {w.dtype} {w.shape} {w.ravel()[:6]}",
                  file=sys.stderr)
            return 1
    from safetensors import safe_open

    with safe_open(path, framework="numpy") as f:
        meta = f.metadata()
    if meta != METADATA:
        print(f"metadata: got {meta}, want {METADATA}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
