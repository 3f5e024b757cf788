#!/usr/bin/env python3
"""The PyTorch side of `cuttle bench memory` (bench/memory.c): the peak bytes of one training step on
the CPU, measured as cuttle's are. The model is bench/pytorch_recipe.py's (torchvision's resnet18 with
a conv1 of --in-channels channels and --classes classes, or the mlp/cnn), Adam at lr 1e-3, a random
batch. A warm-up step (forward, cross-entropy, backward, Adam's step, zero_grad(set_to_none=True))
leaves Adam's state allocated and no gradients; the measured step is the same, as
tools/cuttle/train_loop.c runs it.

Measures, printed as one JSON line:
  alloc_peak_fwd_bwd, alloc_peak_step: torch.profiler.profile(activities=[CPU], profile_memory=True)
    around the step; the CPU allocator's allocation events (positive sizes) and frees (negative) in
    time order, summed from 0 at the step's start: their maximum up to the end of backward (marked
    by an allocation of MARK = 7919 bytes, a size no tensor of the step has, left out of the sums) and over the whole
    step. PyTorch's CPU allocator hands posix_memalign the bytes asked for (64-byte aligned), so
    these are bytes requested, where cuttle's caching allocator counts its rounded blocks.
  rss_before, rss_growth, hwm: VmRSS before the step, VmHWM after it (reset by writing "5" to
    /proc/self/clear_refs just before the step) minus rss_before, and VmHWM (the process's, with its
    libraries). The step runs once more outside the profiler for these, so the profiler's own
    buffers are not in them.
  held_before: the bytes of the parameters, Adam's state and the batch (what is allocated before
    the step)."""
import argparse, json, os, sys

import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pytorch_recipe import model as recipe_model, resnet  # noqa: E402

MARK = 7919  # bytes of the marker allocation between backward and the optimizer step


def vm(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    return -1


def reset_hwm():
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def build(a):
    if a.model.startswith("resnet"):
        return resnet(a.model, a.in_channels, a.classes)
    if (a.in_channels, a.size, a.classes) != (1, 28, 10):
        raise SystemExit(f"{a.model}: only (1, 28, 28) images and 10 classes")
    return recipe_model(a.model)


def step(net, opt, loss_fn, x, y, mark=False):
    out = net(x)
    loss = loss_fn(out, y)
    loss.backward()
    if mark:
        m = torch.empty(MARK, dtype=torch.uint8)
        del m
    opt.step()
    opt.zero_grad(set_to_none=True)
    del out, loss


def alloc_events(prof):
    """(time, bytes) of every CPU allocation (bytes > 0) and free (bytes < 0) the profiler recorded."""
    from torch._C._profiler import _EventType
    out, stack = [], list(prof.profiler.kineto_results.experimental_event_tree())
    while stack:
        e = stack.pop()
        stack.extend(e.children)
        if e.tag == _EventType.Allocation:
            f = e.extra_fields
            if f.device.type == "cpu":
                out.append((e.start_time_ns, f.id, f.alloc_size))
    out.sort()
    return [(t, b) for t, _, b in out]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="resnet18")
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--in-channels", type=int, default=1)
    ap.add_argument("--size", type=int, default=28)
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    net = build(a)
    net.train()
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    x = torch.randn(a.batch_size, a.in_channels, a.size, a.size)
    y = torch.randint(0, a.classes, (a.batch_size,))
    step(net, opt, loss_fn, x, y)  # warm-up: Adam's state, oneDNN's primitives
    held = sum(p.numel() * p.element_size() for p in net.parameters())
    held += sum(p.numel() * p.element_size() for p in net.buffers())
    held += sum(v.numel() * v.element_size() for s in opt.state.values() for v in s.values() if torch.is_tensor(v))
    held += x.numel() * x.element_size() + y.numel() * y.element_size()

    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        step(net, opt, loss_fn, x, y, mark=True)
    ev = alloc_events(prof)
    total, peak_fb, peak, marked = 0, 0, 0, False
    for _, b in ev:
        if not marked and b == MARK:
            marked = True
            continue
        if marked and b == -MARK:
            continue
        total += b
        peak = max(peak, total)
        if not marked:
            peak_fb = max(peak_fb, total)
    if not marked:
        print(json.dumps({"error": "the marker allocation was not among the profiler's events"}), flush=True)
        raise SystemExit(3)

    rss_before = vm("VmRSS")
    ok = reset_hwm()
    step(net, opt, loss_fn, x, y)
    hwm = vm("VmHWM") if ok else -1
    try:
        import torchvision
        tv = torchvision.__version__
    except ImportError:
        tv = None
    print(json.dumps({"model": a.model, "batch": a.batch_size, "held_before": held, "alloc_peak_fwd_bwd": peak_fb,
                      "alloc_peak_step": peak, "alloc_events": len(ev), "alloc_net_end": total,
                      "rss_before": rss_before, "rss_growth": hwm - rss_before if ok else -1, "hwm": hwm,
                      "threads": a.threads, "torch": torch.__version__, "torchvision": tv}),
          flush=True)


if __name__ == "__main__":
    main()
