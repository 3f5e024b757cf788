#!/usr/bin/env python3
"""The PyTorch peer of `cuttle bench gemm` (bench/gemm.c): torch.mm of two n x n matrices on the
same device, for the sizes and dtypes cuttle ran, timed as cuttle times ct_matmul.

  - operands: torch.randn(n, n) on the device, cast to the dtype (f32 and tf32: float32; bf16:
    bfloat16; f16: float16); each call allocates its result, as ct_matmul does;
  - tf32: float32 with torch.backends.cuda.matmul.allow_tf32 = True (CUDA only; the C side never
    asks for it elsewhere); every other dtype runs with it False, restored after. The half
    precisions run with PyTorch's defaults otherwise (cuBLAS may reduce in reduced precision where
    torch.backends.cuda.matmul.allow_{fp16,bf16}_reduced_precision_reduction allow it);
  - timing: bench/bench.c's ct_bench_time (bench_time in pytorch_peer.py) with the C side's
    --warmup, --min-repeats, --max-repeats and --target-s: one call per sample,
    torch.cuda.synchronize before every clock reading on a GPU; the median sample.
Prints one JSON line: "<dtype>_<n>_s" (median seconds per call) for each pair, or "<dtype>_error"
for a dtype PyTorch refuses on this device (torch 1.13 has no float16 matmul on the CPU), and
"no_peer" on a device PyTorch lacks (OpenCL)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pytorch_peer as peer  # noqa: E402


def main():
    ap = peer.parser(__doc__, "cpu", "cpu, cuda:N (opencl:N: no peer)", 1)
    ap.add_argument("--sizes", default="256,512,1024,2048", help="n, comma-separated")
    ap.add_argument("--dtypes", default="f32", help="f32, tf32, bf16, f16, comma-separated")
    a = ap.parse_args()
    peer.check_device(a.device, ("cpu", "cuda"))

    def measure():
        torch, dev, sync = peer.start(a)
        dtypes = {"f32": torch.float32, "tf32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}
        out = {}
        tf32_before = torch.backends.cuda.matmul.allow_tf32
        try:
            for name in a.dtypes.split(","):
                if name not in dtypes:
                    raise ValueError(f"unknown dtype {name!r} (f32, tf32, bf16, f16)")
                torch.backends.cuda.matmul.allow_tf32 = name == "tf32"
                for n in (int(s) for s in a.sizes.split(",")):
                    x = torch.randn(n, n, device=dev).to(dtypes[name])
                    y = torch.randn(n, n, device=dev).to(dtypes[name])
                    try:
                        out[f"{name}_{n}_s"] = peer.bench_time(lambda: torch.mm(x, y), sync, a)
                    except RuntimeError as e:  # a dtype this device's torch.mm lacks: that dtype, not the run
                        out[f"{name}_error"] = str(e).splitlines()[0]
                        break
        finally:
            torch.backends.cuda.matmul.allow_tf32 = tf32_before
        return torch, dev, out

    peer.run("gemm", measure)


if __name__ == "__main__":
    main()
