#!/usr/bin/env python3
"""Export Fashion-MNIST's IDX files as an image folder of grayscale PNG files (issue 19).

    export_fmnist_png.py SRC OUT [--sorted-idx DIR]

SRC holds the four IDX files (gzipped, as Debian's dataset-fashion-mnist installs them, or not).
OUT gets torchvision's ImageFolder layout, OUT/train/<class>/<index>.png and OUT/test/<class>/...:
28 x 28 8-bit grayscale PNGs whose pixels are the IDX bytes. The class folders are named
"<label>_<name>", so that ImageFolder's sorted class names give each class its Fashion-MNIST
label, and the files "<index in the split>.png" zero-padded, so that within a class they keep the
IDX order.

ImageFolder orders the samples class by class. --sorted-idx DIR also writes the four IDX files
(uncompressed) in that order, the labels sorted stably: `cuttle train --data-dir DIR` then sees the
same samples in the same order as `--data imagefolder:OUT`, so the two runs must agree exactly.

Only the standard library: the PNG writer is the format's minimum (IHDR, one IDAT, IEND; filter 0
on every row), per the PNG specification (ISO/IEC 15948, https://www.w3.org/TR/png/).
"""
import argparse
import gzip
import os
import struct
import sys
import zlib

CLASSES = ["T-shirt_top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle_boot"]
SPLITS = {"train": "train", "test": "t10k"}


def read_idx(src, base, magic):
    """The payload and dimensions of SRC/base(.gz), checking the magic."""
    path = os.path.join(src, base)
    opener = open
    if os.path.exists(path + ".gz"):
        path, opener = path + ".gz", gzip.open
    with opener(path, "rb") as f:
        data = f.read()
    got, = struct.unpack(">I", data[:4])
    if got != magic:
        sys.exit(f"{path}: magic 0x{got:08x}, expected 0x{magic:08x}")
    ndim = magic & 0xFF
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    return data[4 + 4 * ndim:], dims


def png_gray(w, h, pixels):
    def chunk(kind, body):
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)
    rows = b"".join(b"\x00" + pixels[r * w:(r + 1) * w] for r in range(h))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 0, 0, 0, 0)) +
            chunk(b"IDAT", zlib.compress(rows, 6)) + chunk(b"IEND", b""))


def write_idx(path, magic, dims, payload):
    with open(path, "wb") as f:
        f.write(struct.pack(">I", magic) + struct.pack(">" + "I" * len(dims), *dims) + payload)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("src")
    ap.add_argument("out")
    ap.add_argument("--sorted-idx", metavar="DIR")
    a = ap.parse_args()
    for split, prefix in SPLITS.items():
        px, (n, h, w) = read_idx(a.src, f"{prefix}-images-idx3-ubyte", 0x803)
        labels, (m,) = read_idx(a.src, f"{prefix}-labels-idx1-ubyte", 0x801)
        if m != n:
            sys.exit(f"{a.src}: {n} {prefix} images but {m} labels")
        for k, name in enumerate(CLASSES):
            os.makedirs(os.path.join(a.out, split, f"{k}_{name}"), exist_ok=True)
        size = h * w
        for i in range(n):
            k = labels[i]
            with open(os.path.join(a.out, split, f"{k}_{CLASSES[k]}", f"{i:05d}.png"), "wb") as f:
                f.write(png_gray(w, h, px[i * size:(i + 1) * size]))
        if a.sorted_idx:
            os.makedirs(a.sorted_idx, exist_ok=True)
            order = sorted(range(n), key=lambda i: labels[i])  # stable: IDX order within a class
            write_idx(os.path.join(a.sorted_idx, f"{prefix}-images-idx3-ubyte"), 0x803, (n, h, w),
                      b"".join(px[i * size:(i + 1) * size] for i in order))
            write_idx(os.path.join(a.sorted_idx, f"{prefix}-labels-idx1-ubyte"), 0x801, (n,),
                      bytes(labels[i] for i in order))
        print(f"{split}: {n} images", flush=True)


if __name__ == "__main__":
    main()
