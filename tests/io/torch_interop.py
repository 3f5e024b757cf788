"""tests/io/torch_interop.py: the PyTorch side of tests/io/test_interop_torch.c.

Both directions train a few steps on real Fashion-MNIST batches and compare the logits of the
Fashion-MNIST test set's first 256 images, read here from the same IDX files cuttle reads:

  python3 torch_interop.py load MODEL DATA CKPT LOGITS OUT
      build MODEL ("mlp" or "cnn") as an nn.Sequential, load the model part of the cuttle checkpoint
      CKPT with load_state_dict(strict=True) (the "optimizer." keys dropped first, and checked to
      hold Adam's two moments of every parameter), run the test images, compare with the logits
      cuttle computed (LOGITS {"logits"}), print the max abs difference, and save ours as OUT
      {"logits"}. Exit status 1 when the difference is over TOL.
  python3 torch_interop.py train MODEL DATA CKPT LOGITS
      train MODEL (seed 7) for STEPS Adam steps on the first STEPS batches of BATCH training
      images, save its state_dict to CKPT and its logits of the test images to LOGITS {"logits"}.
  python3 torch_interop.py correct MODEL DATA CKPT
      load the state_dict CKPT into MODEL and print "correct N": its right answers on the 10000 test
      images, which `cuttle eval --model MODEL --checkpoint CKPT` must count too.
DATA is the folder of the four (gzipped or plain) IDX files.
"""
import gzip
import os
import sys

import numpy as np
import torch
from safetensors.torch import load_file, save_file
from torch import nn

# These match test_interop_torch.c.
STEPS, BATCH, NTEST, TOL = 5, 64, 256, 1e-4
# The normalization of ct_fashion_mnist_load (CT_FASHION_MNIST_MEAN / _STD), computed in float32 in
# the same order as cuttle's lookup table, so both sides see the same input bits.
MEAN, STD = np.float32(0.2860), np.float32(0.3530)


def model(name):
    """The networks of src/nn/models.c (and bench/pytorch_recipe.py); resnet18 is torchvision's with
    a 1-channel conv1, as ct_model_new_for("resnet18", 1, 28, 28, 10) builds it."""
    if name == "resnet18":
        import torchvision
        net = torchvision.models.resnet18(num_classes=10)
        net.conv1 = nn.Conv2d(1, 64, kernel_size=7, stride=2, padding=3, bias=False)
        return net
    if name == "mlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(),
                             nn.Linear(128, 10))
    return nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(32, 64, 3, padding=1),
                         nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(3136, 128), nn.ReLU(), nn.Linear(128, 10))


def read_idx(data, name):
    path = os.path.join(data, name)
    raw = gzip.open(path + ".gz").read() if os.path.exists(path + ".gz") else open(path, "rb").read()
    ndim = raw[3]
    shape = [int.from_bytes(raw[4 + 4 * d:8 + 4 * d], "big") for d in range(ndim)]
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim).reshape(shape)


def images(data, split, n):
    """The first n images of a split as (n, 1, 28, 28) float32, and their labels as int64."""
    prefix = "train" if split == "train" else "t10k"
    px = read_idx(data, f"{prefix}-images-idx3-ubyte")[:n]
    labels = read_idx(data, f"{prefix}-labels-idx1-ubyte")[:n]
    lut = (np.arange(256, dtype=np.float32) / np.float32(255) - MEAN) / STD
    return torch.from_numpy(lut[px].reshape(n, 1, 28, 28)), torch.from_numpy(labels.astype(np.int64))


def logits(net, data):
    x, _ = images(data, "test", NTEST)
    with torch.no_grad():
        return net.eval()(x).contiguous()


def load(name, data, ckpt, theirs_path, out):
    sd = load_file(ckpt)
    params = {k: v for k, v in sd.items() if not k.startswith("optimizer.")}
    net = model(name)
    trainable = dict(net.named_parameters())  # the buffers (BatchNorm's) have no Adam state
    for k, v in params.items():
        if k not in trainable:
            continue
        for slot in ("exp_avg", "exp_avg_sq"):
            s = sd.get(f"optimizer.state.{k}.{slot}")
            if s is None or s.shape != v.shape:
                print(f"torch_interop.py: {ckpt} lacks optimizer.state.{k}.{slot} of shape {tuple(v.shape)}",
                      file=sys.stderr)
                return 1
    net.load_state_dict(params, strict=True)
    ours = logits(net, data)
    theirs = load_file(theirs_path)["logits"]
    if theirs.shape != ours.shape:
        print(f"torch_interop.py: cuttle's logits have shape {tuple(theirs.shape)}, torch's {tuple(ours.shape)}",
              file=sys.stderr)
        return 1
    diff = (ours.double() - theirs.double()).abs().max().item()
    print(f"{name}: cuttle trained and saved, PyTorch loaded: max abs difference of the logits of "
          f"{NTEST} test images, measured by PyTorch: {diff:.3g} (tolerance {TOL:g})")
    save_file({"logits": ours}, out)
    return 0 if diff <= TOL else 1


def correct(name, data, ckpt):
    """Load the state_dict CKPT into MODEL and print how many of the 10000 test images it classifies
    correctly: "correct N" (what `cuttle eval` counts on the same file)."""
    net = model(name)
    net.load_state_dict(load_file(ckpt), strict=True)
    x, y = images(data, "test", 10000)
    with torch.no_grad():
        pred = torch.cat([net.eval()(x[i:i + 500]).argmax(1) for i in range(0, 10000, 500)])
    print(f"correct {(pred == y).sum().item()}")
    return 0


def train(name, data, ckpt, logits_path):
    torch.manual_seed(7)
    net = model(name)
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    x, y = images(data, "train", STEPS * BATCH)
    losses = []
    net.train()
    for s in range(STEPS):
        loss = nn.functional.cross_entropy(net(x[s * BATCH:(s + 1) * BATCH]), y[s * BATCH:(s + 1) * BATCH])
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    print(f"{name}: PyTorch trained {STEPS} steps, losses " + " ".join(f"{v:.4f}" for v in losses))
    save_file({k: v.contiguous() for k, v in net.state_dict().items()}, ckpt)
    save_file({"logits": logits(net, data)}, logits_path)
    return 0


def main():
    mode, name, data = sys.argv[1], sys.argv[2], sys.argv[3]
    # One thread: ctest runs other tests beside this one on the same few cores.
    torch.set_num_threads(1)
    if mode == "load":
        return load(name, data, sys.argv[4], sys.argv[5], sys.argv[6])
    if mode == "correct":
        return correct(name, data, sys.argv[4])
    return train(name, data, sys.argv[4], sys.argv[5])


if __name__ == "__main__":
    sys.exit(main())
