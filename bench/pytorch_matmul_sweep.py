#!/usr/bin/env python3
"""The PyTorch peer of `cuttle bench matmul-sweep` (bench/matmul_sweep.c): float32 n x n torch.mm
for n = 16, 32, ... up to --max-n, timed as cuttle times ct_matmul:

  - cpu: torch.mm of two CPU tensors (n <= --cpu-max-n; above it not timed, as cuttle's CPU);
  - dev (--device cuda:N): compute only, torch.mm of two tensors already on the device; and with
    the copies, both inputs from pageable CPU tensors to the device with a blocking .to(device),
    torch.mm there and the result back with .to("cpu"): what cuttle's ct_to column pays;
  - --device cpu: the CPU alone (cuttle has no device columns then); --device opencl:N: the CPU
    figures, and "dev_no_peer" for the device columns (PyTorch has no OpenCL device).
Timing: bench/bench.c's ct_bench_time (bench_time in pytorch_peer.py) with the C side's --warmup,
--min-repeats, --max-repeats and --target-s; one call per sample, torch.cuda.synchronize before
every clock reading on a GPU; the median. Operands: torch.randn. Prints one JSON line with
"cpu_<n>_ms", "dev_<n>_ms" and "copies_<n>_ms" (median milliseconds)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pytorch_peer as peer  # noqa: E402


def main():
    ap = peer.parser(__doc__, "cpu", "cpu, cuda:N, opencl:N (CPU only)", 3)
    ap.add_argument("--max-n", type=int, default=4096)
    ap.add_argument("--cpu-max-n", type=int, default=4096)
    a = ap.parse_args()
    kind = a.device.split(":")[0]

    def measure():
        import torch
        torch.manual_seed(a.seed)
        cpu = torch.device("cpu")
        dev = torch.device(a.device) if kind == "cuda" else None
        out = {}
        if kind not in ("cpu", "cuda"):
            out["dev_no_peer"] = f"no PyTorch peer on {kind}: PyTorch has no {kind} device (its CPU figures are given)"
        sync = peer.syncer(torch, dev) if dev is not None else (lambda: None)
        n = 16
        while n <= a.max_n:
            ha, hb = torch.randn(n, n), torch.randn(n, n)
            if n <= a.cpu_max_n:
                out[f"cpu_{n}_ms"] = 1e3 * peer.bench_time(lambda: torch.mm(ha, hb), lambda: None, a)
            if dev is not None:
                da, db = ha.to(dev), hb.to(dev)
                out[f"dev_{n}_ms"] = 1e3 * peer.bench_time(lambda: torch.mm(da, db), sync, a)
                out[f"copies_{n}_ms"] = 1e3 * peer.bench_time(lambda: torch.mm(ha.to(dev), hb.to(dev)).to(cpu), sync, a)
            n *= 2
        return torch, dev if dev is not None else cpu, out

    peer.run("matmul-sweep", measure)


if __name__ == "__main__":
    main()
