"""tests/io/torch_interop.py: the PyTorch side of tests/io/test_interop_torch.c.

Both directions train a few steps on real Fashion-MNIST batches and compare the logits of the
Fashion-MNIST test set's first 256 images, read here from the same IDX files cuttle reads:

  python3 torch_interop.py load MODEL DATA CKPT LOGITS OUT
      build MODEL ("mlp" or "cnn") as an nn.Sequential, load the model part of the cuttle checkpoint
      CKPT with load_state_dict(strict=True) (the "optimizer." keys dropped first, and checked to
      hold Adam's two moments of every parameter; its metadata, read with safe_open(CKPT, "pt"),
      must hold cuttle's checksum "cuttle.checksum" = "xxh3_64:<16 hex digits>"), run the test
      images, compare with the logits cuttle computed (LOGITS {"logits"}), print the max abs
      difference, and save ours as OUT {"logits"}. Exit status 1 when the difference is over TOL.
  python3 torch_interop.py train MODEL DATA CKPT LOGITS
      train MODEL (seed 7) for STEPS Adam steps on the first STEPS batches of BATCH training
      images, save its state_dict to CKPT and its logits of the test images to LOGITS {"logits"}.
  python3 torch_interop.py correct MODEL DATA CKPT
      load the state_dict CKPT into MODEL and print "correct N": its right answers on the 10000 test
      images, which `cuttle eval --model MODEL --checkpoint CKPT` must count too.
  python3 torch_interop.py keys SPEC...
      SPEC is NAME,IN_CHANNELS,NUM_CLASSES,CKPT (NAME "resnet18", ..., "resnet50-small"): the file
      CKPT, a freshly built cuttle ResNet, must hold torchvision's state_dict of the same settings
      name by name, shape by shape and dtype by dtype (read from its own header, so that
      num_batches_tracked is I64 and the rest F32 in the file itself, not after a conversion), and
      load with load_state_dict(strict=True). Exit status 1, naming the first mismatch, otherwise.
      (Not the order: a safetensors header has none to speak of; writers sort it.)
DATA is the folder of the four (gzipped or plain) IDX files.
"""
import gzip
import json
import re
import struct
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


def resnet(name, in_channels, num_classes):
    """torchvision's resnet18, resnet34 or resnet50 as ct_model_new_for(name, in_channels, h, w,
    num_classes) builds it: conv1 takes in_channels; with "-small" (src/nn/resnet.c's small_input)
    conv1 is a 3x3 stride-1 conv and maxpool is nn.Identity, which has no state, so the keys stay."""
    import torchvision
    small = name.endswith("-small")
    net = getattr(torchvision.models, name.removesuffix("-small"))(num_classes=num_classes)
    k, stride = (3, 1) if small else (7, 2)
    net.conv1 = nn.Conv2d(in_channels, 64, kernel_size=k, stride=stride, padding=k // 2, bias=False)
    if small:
        net.maxpool = nn.Identity()
    return net


def model(name):
    """The networks of src/nn/models.c (and bench/pytorch_recipe.py) for Fashion-MNIST, as
    ct_model_new(name) builds them: the ResNets with a 1-channel conv1 and 10 classes."""
    if name.startswith("resnet"):
        return resnet(name, 1, 10)
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
    from safetensors import safe_open

    # cuttle's checksum of the tensor bytes is one more metadata string to safetensors and PyTorch
    with safe_open(ckpt, "pt") as f:
        meta = f.metadata() or {}
    if not re.fullmatch(r"xxh3_64:[0-9a-f]{16}", meta.get("cuttle.checksum", "")):
        print(f"torch_interop.py: {ckpt}: metadata \"cuttle.checksum\" is {meta.get('cuttle.checksum')!r}, "
              f"not xxh3_64:<16 lowercase hex digits> (metadata: {meta})", file=sys.stderr)
        return 1
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


# The safetensors dtype of each torch dtype a ResNet's state_dict holds.
ST_DTYPE = {torch.float32: "F32", torch.int64: "I64"}


def header(path):
    """The safetensors header of path: {name: {"dtype", "shape", "data_offsets"}},
    without "__metadata__" (8 bytes little-endian length N, then N bytes of JSON)."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        h = json.loads(f.read(n))
    h.pop("__metadata__", None)
    return h


def state_dict_mismatch(want, got):
    """The first difference between torchvision's state_dict want and a file's header got, or None."""
    for k, t in want.items():
        if k not in got:
            return f"torchvision's {k} is missing from the file"
        # The rule, and torchvision's own dtype, which must agree with it.
        rule = "I64" if k.endswith("num_batches_tracked") else "F32"
        if got[k]["dtype"] != rule or ST_DTYPE.get(t.dtype) != rule:
            return f"{k}: dtype {got[k]['dtype']} in the file, torchvision's {t.dtype}, expected {rule}"
        if got[k]["shape"] != list(t.shape):
            return f"{k}: shape {got[k]['shape']} in the file, torchvision's {list(t.shape)}"
    extra = [k for k in got if k not in want]
    if extra:
        return f"the file has {extra[0]}, which torchvision's state_dict lacks ({len(extra)} such keys)"
    return None


def keys(specs):
    for spec in specs:
        name, in_channels, num_classes, path = spec.split(",", 3)
        in_channels, num_classes = int(in_channels), int(num_classes)
        what = f"{name} (in_channels {in_channels}, num_classes {num_classes})"
        net, got = resnet(name, in_channels, num_classes), header(path)
        bad = state_dict_mismatch(net.state_dict(), got)
        if bad:
            print(f"torch_interop.py: {what}: {bad}", file=sys.stderr)
            return 1
        net.load_state_dict(load_file(path), strict=True)  # raises, naming the keys, on a mismatch
        print(f"{what}: {len(got)} keys with torchvision's names, shapes and dtypes; strict load passed")
    return 0


def main():
    # One thread: ctest runs other tests beside this one on the same few cores.
    torch.set_num_threads(1)
    if sys.argv[1] == "keys":
        return keys(sys.argv[2:])
    mode, name, data = sys.argv[1], sys.argv[2], sys.argv[3]
    if mode == "load":
        return load(name, data, sys.argv[4], sys.argv[5], sys.argv[6])
    if mode == "correct":
        return correct(name, data, sys.argv[4])
    return train(name, data, sys.argv[4], sys.argv[5])


if __name__ == "__main__":
    sys.exit(main())
