#!/usr/bin/env python3
"""The PyTorch peer of `cuttle bench attention` (bench/attention.c): forward and backward of
torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=--causal) on float32 (B, H, T, D)
tensors on the device, at each T of --sizes, with --threads threads (torch.set_num_threads).

One run is cuttle's: q.grad, k.grad, v.grad set to None, out = attention(q, k, v),
(out * r).sum().backward(). The inputs are the C side's formulas of the flat index i, computed in
float64 and rounded to float32: q[i] = sin(0.37 i), k[i] = sin(0.61 i + 1), v[i] = sin(0.23 i + 2),
r[i] = sin(0.11 i + 3); so "sum_out_T" and "sum_dq_T" (sum(out) and sum(q.grad * r) in float64)
show beside cuttle's that the same thing was computed.

Which kernel: PyTorch's own choice (torch._fused_sdp_choice, reported as "kernel_T": math, flash,
efficient, cudnn). torch 1.13 lacks the public function; there the private
torch.nn.functional._scaled_dot_product_attention (its math form) runs, and says so.

Timing: bench/bench.c's ct_bench_time (bench_time in pytorch_peer.py) with the C side's --warmup,
--min-repeats, --max-repeats and --target-s; torch.cuda.synchronize before every clock reading on a
GPU; the median, "ms_T".

Peak bytes, "peak_T", above the inputs as cuttle counts them: on CUDA torch.cuda.max_memory_allocated
after torch.cuda.reset_peak_memory_stats minus torch.cuda.memory_allocated before one run; on the CPU
torch.profiler.profile(profile_memory=True) around one run, the CPU allocator's allocations and frees
in time order summed from the run's start, their maximum (bench/pytorch_memory.py's measure: bytes
requested, which PyTorch's CPU allocator passes to posix_memalign unrounded; memory a library
allocates itself, outside c10's allocator, is not seen). Where the profiler cannot give the events,
"peak_T" is left out and "peak_how" says why.

Where PyTorch runs the math form and its predicted bytes (math_bytes) exceed --max-math-bytes, that
T is skipped: "skip_T" reads "skipped (N GiB)".
Prints one JSON line, or "no_peer" on a device PyTorch lacks (OpenCL)."""
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pytorch_peer as peer  # noqa: E402

KERNELS = {0: "math", 1: "flash", 2: "efficient", 3: "cudnn", 4: "overrideable"}


def math_bytes(a, T):
    """The math form's peak above its inputs: 3 (B, H, T, T) float32 tensors and 3 (B, H, T, D), as
    measured with torch 1.13's on the CPU at T = 512 and 1024 (B H = 4), causal or not."""
    bh = a.batch * a.heads
    return 3 * bh * T * T * 4 + 3 * bh * T * a.head_dim * 4


def formula(torch, shape, f, phase):
    """A float32 tensor whose flat element i is sin(f i + phase), computed as the C side does."""
    n = math.prod(shape)
    x = torch.arange(n, dtype=torch.float64) * f
    return torch.sin(x + phase).to(torch.float32).reshape(shape)


def alloc_peak_cpu(torch, fn):
    """The peak of the CPU allocator's bytes during fn(), from torch.profiler's memory events (as
    bench/pytorch_memory.py reads them); raises where this PyTorch's profiler cannot give them."""
    from torch._C._profiler import _EventType
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    ev, stack = [], list(prof.profiler.kineto_results.experimental_event_tree())
    while stack:
        e = stack.pop()
        stack.extend(e.children)
        if e.tag == _EventType.Allocation:
            f = e.extra_fields
            if f.device.type == "cpu":
                ev.append((e.start_time_ns, f.id, f.alloc_size))
    ev.sort()
    if not ev:
        raise RuntimeError("the profiler recorded no CPU allocation event")
    total = peak = 0
    for _, _, b in ev:
        total += b
        peak = max(peak, total)
    return peak


def main():
    ap = peer.parser(__doc__, "cpu", "cpu, cuda:N (opencl:N: no peer)")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--head-dim", type=int, default=64)
    ap.add_argument("--sizes", default="128,256,512,1024,2048,4096", help="T, comma-separated")
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--max-math-bytes", type=int, default=4 << 30)
    a = ap.parse_args()
    peer.check_device(a.device, ("cpu", "cuda"))

    def measure():
        import torch
        import torch.nn.functional as F
        torch.set_num_threads(a.threads)
        dev = torch.device(a.device)
        sync = peer.syncer(torch, dev)
        public = hasattr(F, "scaled_dot_product_attention")

        def attention(q, k, v):
            if public:
                return F.scaled_dot_product_attention(q, k, v, is_causal=a.causal)
            return F._scaled_dot_product_attention(q, k, v, None, 0.0, False, a.causal)[0]

        def kernel(q, k, v):
            if not public:
                return "math (torch 1.x's private F._scaled_dot_product_attention)"
            try:
                return KERNELS.get(int(torch._fused_sdp_choice(q, k, v, None, 0.0, a.causal)), "unknown")
            except Exception:  # noqa: BLE001: a torch without the query (or without it on this device)
                return "math" if dev.type == "cpu" else "unknown"

        def setup(T):
            """The inputs at T on the device, q, k, v requiring grad, and one run over them."""
            shape = (a.batch, a.heads, T, a.head_dim)
            q, k, v, r = (formula(torch, shape, f, p).to(dev) for f, p in ((0.37, 0), (0.61, 1), (0.23, 2), (0.11, 3)))
            for t in (q, k, v):
                t.requires_grad_(True)

            def run(check=False):
                q.grad = k.grad = v.grad = None
                o = attention(q, k, v)
                (o * r).sum().backward()
                if check:
                    out[f"sum_out_{T}"] = float(o.detach().double().sum())
                    out[f"sum_dq_{T}"] = float((q.grad.double() * r.double()).sum())
                q.grad = k.grad = v.grad = None

            return q, k, v, run

        # the times first, at every T; then the peaks, so that the profiler runs after every timing
        out, sizes = {}, []
        for T in (int(s) for s in a.sizes.split(",")):
            q, k, v, run = setup(T)
            kern = kernel(q, k, v)
            out[f"kernel_{T}"] = kern
            predicted = math_bytes(a, T)
            if kern.startswith("math") and predicted > a.max_math_bytes:
                size = f"{predicted / 2**30:.1f} GiB" if predicted >= 2**30 else f"{predicted / 2**20:.0f} MiB"
                out[f"skip_{T}"] = f"skipped ({size})"
                continue
            sizes.append(T)
            run(check=True)
            out[f"ms_{T}"] = 1e3 * peer.bench_time(run, sync, a)
            del q, k, v, run
        peak_why = None
        for T in sizes:
            q, k, v, run = setup(T)
            run()  # the allocator warm, as after cuttle's check run
            sync()
            if dev.type == "cuda":
                before = torch.cuda.memory_allocated(dev)
                torch.cuda.reset_peak_memory_stats(dev)
                run()
                sync()
                out[f"peak_{T}"] = torch.cuda.max_memory_allocated(dev) - before
            else:
                try:
                    out[f"peak_{T}"] = alloc_peak_cpu(torch, run)
                except Exception as e:  # noqa: BLE001: said in peak_how, the figures without it
                    peak_why = f"{type(e).__name__}: {e}".splitlines()[0]
                    break
            del q, k, v, run
        if dev.type == "cuda":
            out["peak_how"] = "torch.cuda.max_memory_allocated() after reset_peak_memory_stats() minus memory_allocated() before"
        elif peak_why is None:
            out["peak_how"] = ("torch.profiler's CPU allocation events summed from the run's start, their maximum "
                               "(bytes requested, unrounded; as bench memory's)")
        else:
            out["peak_how"] = f"not measured: torch.profiler gave no allocation events ({peak_why})"
        return torch, dev, out

    peer.run("attention", measure)


if __name__ == "__main__":
    main()
