#!/usr/bin/env python3
"""The PyTorch peer of `cuttle bench bandwidth` (bench/bandwidth.c): host <-> CUDA device copy
bandwidth in GB/s (1e9 bytes/s) of uint8 tensors of 4 KiB ... --max-size bytes (powers of 4),
copied as cuttle copies them:

  - H2D pageable: a torch.zeros CPU tensor, .to(device) (blocking);
  - H2D pinned: torch.zeros(pin_memory=True), .to(device, non_blocking=True), then
    torch.cuda.synchronize;
  - D2H pageable: a device tensor, .to("cpu") (blocking);
  - D2H pinned: a device tensor, .to("cpu", non_blocking=True), which allocates its result pinned
    (as cuttle's ct_to with CT_NON_BLOCKING does), then torch.cuda.synchronize.
Each call allocates its destination (PyTorch's caching allocators, as cuttle's). Timing:
bench/bench.c's ct_bench_time (bench_time in pytorch_peer.py) with the C side's --warmup,
--min-repeats, --max-repeats and --target-s; torch.cuda.synchronize before every clock reading;
the median copy. Prints one JSON line with "<h2d|d2h>_<pageable|pinned>_<bytes>" in GB/s; on a
device that is not CUDA (PyTorch has no OpenCL device) the "no_peer" line instead."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pytorch_peer as peer  # noqa: E402


def main():
    ap = peer.parser(__doc__, "cuda:0", "cuda:N (others: no peer)")
    ap.add_argument("--max-size", type=int, default=1 << 30, help="bytes")
    a = ap.parse_args()
    peer.check_device(a.device, ("cuda",))

    def measure():
        import torch
        dev = torch.device(a.device)
        cpu = torch.device("cpu")
        sync = peer.syncer(torch, dev)
        out = {}
        size = 4096
        while size <= a.max_size:
            pageable = torch.zeros(size, dtype=torch.uint8)
            pinned = torch.zeros(size, dtype=torch.uint8, pin_memory=True)
            ondev = torch.zeros(size, dtype=torch.uint8, device=dev)
            cases = (("h2d_pageable", lambda: pageable.to(dev)),
                     ("h2d_pinned", lambda: pinned.to(dev, non_blocking=True)),
                     ("d2h_pageable", lambda: ondev.to(cpu)),
                     ("d2h_pinned", lambda: ondev.to(cpu, non_blocking=True)))
            for name, fn in cases:
                out[f"{name}_{size}"] = size / peer.bench_time(fn, sync, a) * 1e-9
            del pageable, pinned, ondev
            size *= 4
        return torch, dev, out

    peer.run("bandwidth", measure)


if __name__ == "__main__":
    main()
