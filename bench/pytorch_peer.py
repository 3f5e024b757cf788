"""What the PyTorch peers of `cuttle bench gemm`, `matmul-sweep`, `norms` and `bandwidth` share
(bench/pytorch_gemm.py and the others import it): the device check, the timing loop of
bench/bench.c's ct_bench_time, and the one JSON line a peer prints (bench/bench.c's
ct_bench_peer_run reads it). Works with PyTorch 1.13 (Debian 12's python3-torch) and 2.x.

The protocol, one line on stdout:
  - the result: a JSON object with "peer" (the benchmark), "torch" (torch.__version__), "device"
    and "threads" (torch.get_num_threads()), then the benchmark's own keys;
  - {"no_peer": "no PyTorch peer on KIND: ..."} and exit status 0 where PyTorch has no such device
    (OpenCL): the C side fills PyTorch's cells with the text before the colon;
  - {"error": "..."} and exit status 1 when the measurement raised (torch not importable, a
    dtype or device PyTorch refuses): the C side prints cuttle's figures and "PyTorch failed".
"""
import argparse
import json
import sys
import time
import traceback


def check_device(name, kinds):
    """The kind of the cuttle device name ("cpu", "cuda:0", "opencl:0" -> "cpu", "cuda", "opencl").
    Where it is not one of kinds (the kinds this peer can time), prints the no_peer line and exits
    0. Needs no torch, so that it says so where torch is missing too."""
    kind = name.split(":")[0]
    if kind not in kinds:
        why = f"this peer times {' and '.join(kinds)} only" if kind in ("cpu", "cuda") else f"PyTorch has no {kind} device"
        print(json.dumps({"no_peer": f"no PyTorch peer on {kind}: {why}"}), flush=True)
        sys.exit(0)
    return kind


def parser(doc, device, device_help, seed=None):
    """The argument parser every peer starts from: its description (doc's first line), --device
    (default device; cuttle's device name), --seed when the peer draws random data, and the options
    of ct_bench_opts (bench/bench.h), which the C side passes as it used them. The peer adds its
    own options and calls parse_args."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--device", default=device, help=f"cuttle's device name: {device_help}")
    if seed is not None:
        ap.add_argument("--seed", type=int, default=seed)
    ap.add_argument("--warmup", type=int, default=1, help="untimed calls first")
    ap.add_argument("--min-repeats", type=int, default=3, help="timed samples at least")
    ap.add_argument("--max-repeats", type=int, default=100, help="and at most")
    ap.add_argument("--target-s", type=float, default=0.5, help="stop adding samples after this many timed seconds")
    return ap


def syncer(torch, dev):
    """The function to call before every clock reading: torch.cuda.synchronize on a CUDA device,
    nothing on the CPU (bench/bench.c synchronizes only a device that is not the CPU)."""
    if dev.type == "cuda":
        return lambda: torch.cuda.synchronize(dev)
    return lambda: None


def start(a):
    """torch imported and seeded with a.seed, the device a.device and its syncer: what a peer's
    measure() begins with. Returns (torch, device, sync)."""
    import torch
    torch.manual_seed(a.seed)
    dev = torch.device(a.device)
    return torch, dev, syncer(torch, dev)


def bench_time(fn, sync, a):
    """ct_bench_time's twin (bench/bench.c): a.warmup calls of fn, sync, then samples of one call
    each (sync before the clock is read) until a.min_repeats samples are done and a.target_s
    seconds have passed, or a.max_repeats. Returns the median sample in seconds."""
    for _ in range(max(a.warmup, 1)):
        fn()
    sync()
    lo = max(a.min_repeats, 1)
    hi = max(a.max_repeats, lo)
    target = a.target_s if a.target_s > 0 else 0.5
    s, spent = [], 0.0
    while len(s) < hi and (len(s) < lo or spent < target):
        t0 = time.perf_counter()
        fn()
        sync()
        t = time.perf_counter() - t0
        spent += t
        s.append(t)
    s.sort()
    n = len(s)
    return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])


def run(peer, measure):
    """Print measure()'s dict (after the keys every peer gives) as the result line; when it raises,
    the traceback to stderr and {"error": "Type: message"}, exit status 1. measure imports torch
    itself, so a missing torch is such an error too. Returns nothing."""
    try:
        torch, dev, figures = measure()
        out = {"peer": peer, "torch": torch.__version__, "device": str(dev), "threads": torch.get_num_threads()}
        out.update(figures)
    except Exception as e:  # noqa: BLE001: every failure becomes the C side's "PyTorch failed: ..."
        traceback.print_exc()
        print(json.dumps({"error": f"{type(e).__name__}: {e}".splitlines()[0]}), flush=True)
        sys.exit(1)
    print(json.dumps(out), flush=True)
