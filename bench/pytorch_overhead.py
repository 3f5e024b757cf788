#!/usr/bin/env python3
"""The PyTorch peer of `cuttle bench overhead` (bench/overhead.c), timed the same way: torch.add of
two 1-element float32 tensors and torch.mm of two 100 x 100 float32 matrices, each with grad
recording off (inputs not requiring grad) and on (inputs requiring grad, so every call builds a
graph node that is freed with its result). One call per sample, torch.cuda.synchronize before the
clock is read on a GPU (launch + kernel + synchronization), warmup of n/10 + 1 calls, and the
median, p10 and p90 of n samples in microseconds. Prints one JSON line with keys
<op>_<grad>_{median,p10,p90}_us and <op>_<grad>_calls (op: add, mm; grad: off, on)."""
import argparse, json, os, sys, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pytorch_peer as peer  # noqa: E402


def time_op(fn, n, sync):
    for _ in range(n // 10 + 1):
        fn()
    sync()
    s = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        sync()
        s.append(time.perf_counter() - t0)
    s.sort()
    median = s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])
    return median, s[(n - 1) // 10], s[(n - 1) - (n - 1) // 10]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--iters", type=int, default=20000, help="calls of add; mm runs a tenth as many (at least 10)")
    ap.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0: torch's default)")
    ap.add_argument("--seed", type=int, default=2)
    a = ap.parse_args()
    peer.check_device(a.device, ("cpu", "cuda"))  # OpenCL: the no_peer line, before torch is needed
    import torch
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    dev = torch.device(a.device)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    out = {"device": str(dev), "torch": torch.__version__, "threads": torch.get_num_threads()}
    for op in ("add", "mm"):
        shape = (1,) if op == "add" else (100, 100)
        n = a.iters if op == "add" else max(a.iters // 10, 10)
        for grad in ("off", "on"):
            x = torch.randn(shape, device=dev, requires_grad=grad == "on")
            y = torch.randn(shape, device=dev, requires_grad=grad == "on")
            fn = (lambda: torch.add(x, y)) if op == "add" else (lambda: torch.mm(x, y))
            med, p10, p90 = time_op(fn, n, sync)
            key = f"{op}_{grad}"
            out.update({key + "_median_us": round(med * 1e6, 3), key + "_p10_us": round(p10 * 1e6, 3),
                        key + "_p90_us": round(p90 * 1e6, 3), key + "_calls": n})
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
