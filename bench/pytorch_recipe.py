#!/usr/bin/env python3
"""The same training recipes as `cuttle train`, in PyTorch, for the peer comparison in
docs/perf.md: Fashion-MNIST from the Debian IDX files, normalized with mean 0.2860 and std 0.3530,
the mlp or cnn of cuttle (same layers, same state_dict keys), or torchvision's resnet18, resnet34 or
resnet50 with num_classes=10 and conv1 = Conv2d(1, 64, 7, 2, 3, bias=False) (what cuttle's
ct_model_new_for("resnet18", 1, 28, 28, 10, ...) builds; "resnet18-small" etc.: conv1 =
Conv2d(1, 64, 3, 1, 1, bias=False) and no max-pool; conv1 initialized as torchvision initializes
its convolutions, kaiming_normal_ fan_out), Adam, cross-entropy, shuffled batches. --max-steps N
ends each epoch after N optimizer steps, --test-limit N evaluates on the first N test images.
Prints one JSON line per epoch: epoch, train_loss, test_acc, images_per_s, seconds, images,
cpu_seconds (time.process_time() over the training loop: all threads' CPU time).
With --compile the model is wrapped in torch.compile; one forward and backward on the first batch
(no optimizer step, the gradients then dropped) compiles it before the timed loop, its time given
as compile_seconds. On a failure of torch.compile the script prints {"error": ...} and exits 3.
On a GPU, float32 convolutions and matmuls run in full float32, as cuttle's do by default
(ct_set_allow_tf32(0)): PyTorch's own default lets cuDNN use TF32 for convolutions
(torch.backends.cudnn.allow_tf32 = True), which would time other arithmetic than cuttle's.
--profile runs torch.profiler over each epoch's steps after the first (the peer of `cuttle train
--profile`) and prints, to stderr, the wall time per profiled step and key_averages() by self time
(self CPU time; on a GPU self CUDA time), so that the JSON lines on stdout stay as they are.
--cuda-graph (a CUDA device only) is the peer of `cuttle train --cuda-graph`, PyTorch's "whole
network capture" recipe (torch.cuda.graphs docs): Adam(capturable=True), the first 3 steps eager on
a side stream (the warm-up), then forward, loss, backward, step and the loss sum captured once in
torch.cuda.graph on static copies of the batch and replayed for every full batch; the epoch's last,
smaller batch eager. Warm-up and capture are inside the first epoch's timed loop, as cuttle's; the
capture's own seconds are printed as compile_seconds. A failure prints {"error": ...}, exits 3.
--amp bf16|f16 is the peer of `cuttle train --amp`: PyTorch's "Automatic Mixed Precision" recipe,
forward and loss under torch.autocast(device_type, dtype), backward outside it, and for f16 a
torch.amp.GradScaler (scale, step, update); the test accuracy is measured in float32, as cuttle's.
With --cuda-graph only bf16, its autocast without the weight cache (cache_enabled=False), as the
torch.cuda.graphs docs ask of autocast inside a capture."""
import argparse, contextlib, gzip, json, os, struct, sys, time

import numpy as np
import torch
from torch import nn


def read_idx(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    magic, = struct.unpack(">I", data[:4])
    ndim = magic & 0xFF
    shape = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(shape)


def load(data_dir, split):
    prefix = "train" if split == "train" else "t10k"
    def find(name):
        p = os.path.join(data_dir, name)
        return p + ".gz" if os.path.exists(p + ".gz") else p
    x = read_idx(find(f"{prefix}-images-idx3-ubyte")).astype(np.float32) / 255.0
    y = read_idx(find(f"{prefix}-labels-idx1-ubyte")).astype(np.int64)
    x = (x - 0.2860) / 0.3530
    return torch.from_numpy(x).unsqueeze(1), torch.from_numpy(y)


def resnet(name, in_channels=1, num_classes=10):
    import torchvision
    small = name.endswith("-small")
    net = getattr(torchvision.models, name[:-len("-small")] if small else name)(num_classes=num_classes)
    net.conv1 = (nn.Conv2d(in_channels, 64, 3, 1, 1, bias=False) if small else
                 nn.Conv2d(in_channels, 64, 7, 2, 3, bias=False))
    nn.init.kaiming_normal_(net.conv1.weight, mode="fan_out", nonlinearity="relu")
    if small:
        net.maxpool = nn.Identity()
    return net


def model(name):
    if name.startswith("resnet"):
        return resnet(name)
    if name == "mlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(),
                             nn.Linear(128, 10))
    return nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(32, 64, 3, padding=1),
                         nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(3136, 128), nn.ReLU(), nn.Linear(128, 10))


def start_profile(torch, dev):
    """A torch.profiler session, entered: CPU activity, and CUDA's on a GPU."""
    acts = [torch.profiler.ProfilerActivity.CPU]
    if dev.type == "cuda":
        acts.append(torch.profiler.ProfilerActivity.CUDA)
    prof = torch.profiler.profile(activities=acts)
    prof.__enter__()
    return prof


def stop_profile(torch, dev, prof, steps, secs):
    """Ends prof after steps steps that took secs of wall time; the report to stderr."""
    if dev.type == "cuda":
        torch.cuda.synchronize()
    secs = max(secs, 1e-9)
    prof.__exit__(None, None, None)
    print(f"profile (torch.profiler, {dev}): {steps} steps after the first, "
          f"{1e3 * secs / max(steps, 1):.3f} ms per step of wall time", file=sys.stderr)
    key = "self_cuda_time_total" if dev.type == "cuda" else "self_cpu_time_total"
    print(prof.key_averages().table(sort_by=key, row_limit=20), file=sys.stderr, flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="cnn")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--limit", type=int, default=0, help="train on the first N training images only (0: all)")
    ap.add_argument("--compile", action="store_true", help="wrap the model in torch.compile")
    ap.add_argument("--optimizer", default="adam", choices=["adam", "sgd"])
    ap.add_argument("--max-steps", type=int, default=0, help="end each epoch after N optimizer steps (0: none)")
    ap.add_argument("--test-limit", type=int, default=0, help="evaluate on the first N test images only (0: all)")
    ap.add_argument("--channels-last", action="store_true",
                    help="model and input batches in torch.channels_last (as cuttle's --channels-last)")
    ap.add_argument("--cuda-graph", action="store_true", help="capture the step in a CUDA graph (after 3 eager steps)")
    ap.add_argument("--amp", choices=["bf16", "f16"], help="mixed precision: torch.autocast, and a GradScaler for f16")
    ap.add_argument("--profile", action="store_true",
                    help="torch.profiler over the steps after the first; the table to stderr")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.backends.cudnn.allow_tf32 = False  # cuttle's default: float32 convolutions in float32
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.manual_seed(a.seed)
    dev = torch.device(a.device)
    xtr, ytr = load(a.data_dir, "train")
    xte, yte = load(a.data_dir, "test")
    if a.limit:
        xtr, ytr = xtr[:a.limit], ytr[:a.limit]
    if a.test_limit:
        xte, yte = xte[:a.test_limit], yte[:a.test_limit]
    xtr, ytr, xte, yte = xtr.to(dev), ytr.to(dev), xte.to(dev), yte.to(dev)
    net = model(a.model).to(dev)
    fmt = torch.channels_last if a.channels_last else torch.contiguous_format
    net = net.to(memory_format=fmt)
    if a.cuda_graph and (dev.type != "cuda" or a.compile or a.profile or a.amp == "f16"):
        print(json.dumps({"error": "--cuda-graph needs a CUDA device, without --compile, --profile and --amp f16"}),
              flush=True)
        raise SystemExit(3)
    amp_dtype = {"bf16": torch.bfloat16, "f16": torch.float16}.get(a.amp)
    # torch.amp.GradScaler (any device) and float16 autocast on the CPU came with PyTorch 2.3; an older
    # PyTorch (Debian's 1.13) would turn autocast off with a warning and time float32 instead
    if a.amp == "f16" and not hasattr(torch.amp, "GradScaler") and dev.type != "cuda":
        print(json.dumps({"error": f"--amp f16 on {dev.type} needs PyTorch 2.3 or later (this is {torch.__version__})"}),
              flush=True)
        raise SystemExit(3)

    def autocast():  # the forward and the loss: in autocast with --amp, as they are without it
        if amp_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(dev.type, dtype=amp_dtype, cache_enabled=not a.cuda_graph)
    scaler = None
    if a.amp == "f16":
        scaler = torch.amp.GradScaler(dev.type) if hasattr(torch.amp, "GradScaler") else torch.cuda.amp.GradScaler()

    def backward_step(loss):  # backward and the optimizer step, through the GradScaler with --amp f16
        if scaler is None:
            loss.backward()
            opt.step()
        else:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
    opt = (torch.optim.Adam(net.parameters(), lr=a.lr, capturable=a.cuda_graph) if a.optimizer == "adam" else
           torch.optim.SGD(net.parameters(), lr=a.lr))
    loss_fn = nn.CrossEntropyLoss()
    compile_secs = 0.0
    if a.compile:
        t0 = time.perf_counter()
        try:
            net = torch.compile(net)
            with autocast():
                warm = loss_fn(net(xtr[:a.batch_size]), ytr[:a.batch_size])
            warm.backward()  # compiles; no step
            opt.zero_grad(set_to_none=True)
            if dev.type == "cuda":
                torch.cuda.synchronize()
        except Exception as e:  # noqa: BLE001 - any compile failure ends the run with a reason
            print(json.dumps({"error": f"torch.compile failed: {type(e).__name__}: {str(e)[:300]}"}), flush=True)
            raise SystemExit(3)
        compile_secs = time.perf_counter() - t0
    graph = None  # --cuda-graph: the captured step, its static batch and loss sum
    total_static = torch.zeros((), device=dev)  # the loss sum the graph adds to (one tensor for the run)
    side = torch.cuda.Stream() if a.cuda_graph else None
    for epoch in range(a.epochs):
        net.train()
        perm = torch.randperm(len(xtr), device=dev)
        if dev.type == "cuda":
            torch.cuda.synchronize()
        t0, c0 = time.perf_counter(), time.process_time()
        total, seen = total_static.zero_(), 0
        prof = None
        for step, i in enumerate(range(0, len(xtr), a.batch_size)):
            if a.max_steps and step >= a.max_steps:
                break
            if a.profile and step == 1:  # after the first step, as cuttle train --profile
                prof, prof_steps = start_profile(torch, dev), 0
                prof_t0 = time.perf_counter()
            idx = perm[i:i + a.batch_size]
            x, y = xtr[idx].contiguous(memory_format=fmt), ytr[idx]
            if a.cuda_graph and len(idx) == a.batch_size and (graph is not None or step >= 3):
                if graph is None:
                    tc = time.perf_counter()
                    try:
                        graph, static_x, static_y = torch.cuda.CUDAGraph(), x.clone(), y.clone()
                        opt.zero_grad(set_to_none=True)
                        with torch.cuda.graph(graph):
                            with autocast():
                                static_loss = loss_fn(net(static_x), static_y)
                            static_loss.backward()
                            opt.step()
                            total.add_(static_loss.detach() * a.batch_size)
                    except Exception as e:  # noqa: BLE001 - a failed capture ends the run with a reason
                        print(json.dumps({"error": f"CUDA graph capture failed: {type(e).__name__}: {str(e)[:300]}"}),
                              flush=True)
                        raise SystemExit(3)
                    graph.replay()  # the capture ran nothing: this trains the batch
                    torch.cuda.synchronize()
                    compile_secs = time.perf_counter() - tc
                else:
                    static_x.copy_(x)
                    static_y.copy_(y)
                    graph.replay()
            elif a.cuda_graph and graph is None:  # the warm-up, on a side stream as the docs ask
                side.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(side):
                    opt.zero_grad(set_to_none=True)
                    with autocast():
                        loss = loss_fn(net(x), y)
                    loss.backward()
                    opt.step()
                    total.add_(loss.detach() * len(idx))
                torch.cuda.current_stream().wait_stream(side)
            else:
                # after a capture the gradients are the graph's static tensors: zeroed, never dropped
                opt.zero_grad(set_to_none=graph is None)
                with autocast():
                    loss = loss_fn(net(x), y)
                backward_step(loss)
                total.add_(loss.detach() * len(idx))
            seen += len(idx)
            if prof is not None:
                prof_steps += 1
        if prof is not None:
            stop_profile(torch, dev, prof, prof_steps, time.perf_counter() - prof_t0)
        if dev.type == "cuda":
            torch.cuda.synchronize()
        secs, cpu = time.perf_counter() - t0, time.process_time() - c0
        net.eval()
        with torch.no_grad():
            correct = sum((net(xte[i:i + 1000].contiguous(memory_format=fmt)).argmax(1) == yte[i:i + 1000]).sum().item()
                          for i in range(0, len(xte), 1000))
        print(json.dumps({"epoch": epoch + 1, "train_loss": round(total.item() / seen, 6), "test_acc": correct / len(xte),
                          "images_per_s": round(seen / secs, 1), "seconds": round(secs, 3),
                          "images": seen, "cpu_seconds": round(cpu, 3), "device": str(dev),
                          "threads": a.threads, "torch": torch.__version__, "model": a.model, "compiled": a.compile,
                          "cuda_graph": a.cuda_graph,
                          "channels_last": a.channels_last, "amp": a.amp or "none",
                          "compile_seconds": round(compile_secs, 3)}), flush=True)


if __name__ == "__main__":
    main()
