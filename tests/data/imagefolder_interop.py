"""tests/data/imagefolder_interop.py: the torchvision side of tests/data/test_interop_imagefolder.c.

  python3 imagefolder_interop.py ROOT OUT

reads the folder ROOT with torchvision.datasets.ImageFolder (its default loader: PIL, convert("RGB"))
and writes into OUT:
  classes.txt   the classes in index order, one a line (class_to_idx, checked to be that order)
  samples.txt   "LABEL PATH" a line, in ImageFolder's sample order
  CONFIG.bin    for each CONFIG below, every sample through its transforms then PILToTensor: the
                uint8 CHW arrays one after the other
The configs match test_interop_imagefolder.c's ct_imagefolder_opts.
"""
import os
import sys

import numpy as np
import torch
import torchvision
from torchvision import transforms as T

CONFIGS = {
    # name: transforms before PILToTensor
    "rgb_resize6_crop5": [T.Resize(6), T.CenterCrop(5)],
    "gray_resize7x4": [T.Grayscale(1), T.Resize((7, 4))],
    "rgb_crop9x8": [T.CenterCrop((9, 8))],
    "rgb_up11_crop11": [T.Resize(11), T.CenterCrop(11)],
    "gray_resize3_crop3": [T.Grayscale(1), T.Resize(3), T.CenterCrop(3)],
}


def main():
    root, out = sys.argv[1], sys.argv[2]
    print("torchvision", torchvision.__version__, "torch", torch.__version__)
    base = torchvision.datasets.ImageFolder(root)
    assert base.class_to_idx == {c: i for i, c in enumerate(base.classes)}
    with open(os.path.join(out, "classes.txt"), "w") as f:
        f.writelines(c + "\n" for c in base.classes)
    with open(os.path.join(out, "samples.txt"), "w") as f:
        f.writelines("%d %s\n" % (label, path) for path, label in base.samples)
    for name, tfs in CONFIGS.items():
        ds = torchvision.datasets.ImageFolder(root, transform=T.Compose(tfs + [T.PILToTensor()]))
        with open(os.path.join(out, name + ".bin"), "wb") as f:
            for i in range(len(ds)):
                x, _ = ds[i]
                f.write(np.ascontiguousarray(x.numpy(), dtype=np.uint8).tobytes())


if __name__ == "__main__":
    main()
