#!/usr/bin/env python3
"""The PyTorch side of `cuttle bench decode` (bench/decode.c): an image folder read by
torchvision.datasets.ImageFolder (PIL's decoders) through torch.utils.data.DataLoader with
--workers worker processes (0: in this process), batch --batch-size, in order, transform ToTensor
(Grayscale(1) first with --gray), the sample cuttle's loader makes without normalization. One
untimed pass, then --repeats timed passes (each a new iterator, so the workers start in it, as
cuttle's loader starts its threads in its ct_loader_new); prints one JSON line with the median's
images_per_s."""
import argparse, json, os, statistics, time

import torch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--workers", type=int, default=0)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--gray", action="store_true")
    a = ap.parse_args()
    import torchvision
    from torchvision import transforms
    torch.set_num_threads(1)
    tf = transforms.Compose(([transforms.Grayscale(1)] if a.gray else []) + [transforms.ToTensor()])
    ds = torchvision.datasets.ImageFolder(a.root, transform=tf)
    dl = torch.utils.data.DataLoader(ds, batch_size=a.batch_size, shuffle=False, num_workers=a.workers)
    times = []
    for r in range(a.repeats + 1):
        t0 = time.perf_counter()
        n = sum(len(y) for _, y in dl)
        if r:
            times.append(time.perf_counter() - t0)
    secs = statistics.median(times)
    print(json.dumps({"images": n, "workers": a.workers, "images_per_s": round(n / secs, 1), "seconds": round(secs, 4),
                      "torch": torch.__version__, "torchvision": torchvision.__version__,
                      "pil": __import__("PIL").__version__}), flush=True)


if __name__ == "__main__":
    main()
