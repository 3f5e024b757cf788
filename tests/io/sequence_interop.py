#!/usr/bin/env python3
"""The PyTorch side of tests/io/test_interop_sequence.c: FILE (safetensors) holds one case's inputs,
cuttle's results and, in its metadata, the case and its options. This recomputes the results with
torch.nn.functional / torch.nn in float64 (scaled_dot_product_attention where the torch has it, 2.1
or later; with Debian's 1.13 its documented math form over torch's matmul and softmax), prints each result's max |cuttle - torch| and exits 1
when one exceeds tol (metadata "tol", default 1e-9) relative to max(1, |torch|)."""
import sys

import torch
import torch.nn.functional as F
from safetensors import safe_open
from safetensors.torch import load_file


def main(path):
    t = load_file(path)
    with safe_open(path, "pt") as f:
        meta = f.metadata()
    case = meta["case"]
    tol = float(meta.get("tol", "1e-9"))
    want = {}
    if case == "sdpa":
        q, k, v = (t[n].clone().requires_grad_(True) for n in ("q", "k", "v"))
        scale, causal, mask = float(meta["scale"]), meta["is_causal"] == "1", t.get("mask")
        if hasattr(F, "scaled_dot_product_attention") and torch.__version__ >= "2.1":
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal, scale=None if scale == 0 else scale)
        else:  # Debian's torch 1.13 has no F.scaled_dot_product_attention: its documented math form
            s = q @ k.transpose(-2, -1) * (scale if scale else q.shape[-1] ** -0.5)
            if causal:
                s = s.masked_fill(~torch.ones(s.shape[-2], s.shape[-1], dtype=torch.bool).tril(), float("-inf"))
            if mask is not None:
                s = s.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else s + mask
            out = torch.softmax(s, -1) @ v
        (out * t["r"]).sum().backward()
        want = {"out": out, "grad_q": q.grad, "grad_k": k.grad, "grad_v": v.grad}
    elif case == "embedding":
        w = t["weight"].clone().requires_grad_(True)
        out = F.embedding(t["indices"], w, padding_idx=int(meta["padding_idx"]))
        (out * t["r"]).sum().backward()
        want = {"out": out, "grad_weight": w.grad}
    elif case == "cross_entropy":
        logits = t["logits"].clone().requires_grad_(True)
        loss = F.cross_entropy(logits, t["target"], weight=t["weight"], ignore_index=int(meta["ignore_index"]),
                               reduction=meta["reduction"], label_smoothing=float(meta["label_smoothing"]))
        l = loss if meta["reduction"] != "none" else (loss * torch.arange(1, loss.numel() + 1, dtype=loss.dtype)).sum()
        l.backward()
        want = {"loss": loss, "grad_logits": logits.grad}
    elif case == "multihead_attention":
        E = t["in_proj_weight"].shape[1]
        m = torch.nn.MultiheadAttention(E, int(meta["num_heads"]), batch_first=True, dtype=torch.float64)
        m.load_state_dict({n: t[n] for n in ("in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias")},
                          strict=True)
        m.eval()
        x = t["x"]
        L = x.shape[1]
        causal = meta["is_causal"] == "1"
        mask = torch.ones(L, L, dtype=torch.bool).triu(1) if causal else None  # true: not allowed (MHA's sense)
        with torch.no_grad():  # torch 1.13's forward has no is_causal: the mask says it
            out, _ = m(x, x, x, attn_mask=mask, need_weights=False)
        want = {"out": out}
    else:
        print(f"sequence_interop.py: unknown case {case!r}")
        return 1
    bad = 0
    for name, w in want.items():
        got = t[name]
        w = w.detach().to(got.dtype)
        diff = float((got - w).abs().max()) if w.numel() else 0.0
        rel = diff / max(1.0, float(w.abs().max()) if w.numel() else 1.0)
        ok = rel <= tol and got.shape == w.shape
        print(f"{path.rsplit('/', 1)[-1]} {name}: max |cuttle - torch| = {diff:.3g} (tol {tol:g}){'' if ok else '  FAIL'}")
        bad += not ok
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
