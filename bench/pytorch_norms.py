#!/usr/bin/env python3
"""The PyTorch peer of `cuttle bench norms` (bench/norms.c): --count matmuls C_i = A B_i of
--size x --size float32 matrices on the device (A and the stacked B_i from torch.randn), logging
the Frobenius norm torch.linalg.norm(C_i) of each, three ways, as cuttle's three paths:

  (a) .item() on every norm: one device-to-host copy and one synchronization per norm;
  (b) the norms kept on the device, joined with torch.stack and copied to the host once (.cpu());
  (c) each norm copied into a preallocated device tensor (log[i].copy_(norm)), copied once (.cpu()).

A run of a path is the whole loop of --count norms. Timing: bench/bench.c's ct_bench_time
(bench_time in pytorch_peer.py) with the C side's --warmup, --min-repeats, --max-repeats and
--target-s; torch.cuda.synchronize before every clock reading on a GPU; the median. Prints one JSON
line with "a_ms", "b_ms", "c_ms" (median milliseconds per run) and "max_diff" (the largest
|difference| of (b)'s and (c)'s norms from (a)'s), or "no_peer" on a device PyTorch lacks (OpenCL)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pytorch_peer as peer  # noqa: E402


def main():
    ap = peer.parser(__doc__, "cpu", "cpu, cuda:N (opencl:N: no peer)", 4)
    ap.add_argument("--count", type=int, default=1000)
    ap.add_argument("--size", type=int, default=100)
    a = ap.parse_args()
    peer.check_device(a.device, ("cpu", "cuda"))

    def measure():
        torch, dev, sync = peer.start(a)
        A = torch.randn(a.size, a.size, device=dev)
        Bs = torch.randn(a.count, a.size, a.size, device=dev)
        result = {}

        def path_a():
            result["a"] = [torch.linalg.norm(A @ Bs[i]).item() for i in range(a.count)]

        def path_b():
            kept = [torch.linalg.norm(A @ Bs[i]) for i in range(a.count)]
            result["b"] = torch.stack(kept).cpu()

        def path_c():
            log = torch.empty(a.count, device=dev)
            for i in range(a.count):
                log[i].copy_(torch.linalg.norm(A @ Bs[i]))
            result["c"] = log.cpu()

        out = {}
        for name, fn in (("a", path_a), ("b", path_b), ("c", path_c)):
            out[name + "_ms"] = 1e3 * peer.bench_time(fn, sync, a)
        ref = torch.tensor(result["a"], dtype=torch.float64)
        out["max_diff"] = max(float((result[k].double() - ref).abs().max()) for k in ("b", "c"))
        return torch, dev, out

    peer.run("norms", measure)


if __name__ == "__main__":
    main()
