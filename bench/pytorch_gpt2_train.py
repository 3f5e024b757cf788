#!/usr/bin/env python3
"""The PyTorch peer of `cuttle bench train --model gpt2` (bench/train_gpt2.c): GPT-2 training steps in plain PyTorch eager.

The model is GPT-2 (transformers' GPT2LMHeadModel, as cuttle's ct_gpt2_new builds it) written out:
nn.Embedding wte (V, E) and wpe (P, E); n_layer pre-LN blocks, each LayerNorm ln_1, a Linear c_attn
(E -> 3E), causal attention through F.scaled_dot_product_attention(is_causal=True), a Linear c_proj
(E -> E), LayerNorm ln_2, an MLP of Linear c_fc (E -> 4E), GELU(approximate='tanh') and Linear
c_proj (4E -> E); ln_f; the lm_head tied to wte (logits = h wte^T). Weights normal(0, 0.02) (the
two c_proj weights of each block 0.02 / sqrt(2 n_layer), GPT-2's scaled residual init), biases 0,
LayerNorms (1, 0), dropout 0, float32.

One step, as cuttle's: logits (B, T, V), F.cross_entropy of logits (B T, V) against the next
tokens (mean), opt.zero_grad(set_to_none=True), backward, clip_grad_norm_(1.0), opt.step(), with
torch.optim.AdamW(lr, weight_decay) over every parameter: cuttle's AdamW decays every parameter
(nanoGPT decays the matrices only), so both sides do the same work. --warmup-steps untimed steps,
then --steps timed ones, the clock read (after torch.cuda.synchronize on a GPU) before the first
timed step and after the last. The loss is read (.item()) at the first step and the last only.

The batches are the C side's: row b of step s (warmup steps counted) is T + 1 tokens,
(131 b + 17 t + 7 s) % V for t = 0..T, or the bytes of --text FILE from ((s B + b) T) % (n - T);
the inputs are its first T, the targets its last T.

Attention: F.scaled_dot_product_attention where torch has it (2.x; "kernel" says which backend
torch._fused_sdp_choice picks); torch 1.13 lacks the public function, and there its private
F._scaled_dot_product_attention (the math form) runs; without either, a math form written here.

Prints one JSON line: tokens_per_s, ms_per_step, first_loss, last_loss, params, kernel, and
torch, device, threads (bench/pytorch_peer.py's run)."""
import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pytorch_peer as peer  # noqa: E402

KERNELS = {0: "math", 1: "flash", 2: "efficient", 3: "cudnn", 4: "overrideable"}


def batches(a, step, text):
    """The (B, T + 1) token rows of step, as lists."""
    B, T, V = a.batch_size, a.n_positions, a.vocab_size
    rows = []
    for b in range(B):
        if text is not None:
            start = ((step * B + b) * T) % (len(text) - T)
            rows.append(list(text[start:start + T + 1]))
        else:
            rows.append([(b * 131 + t * 17 + step * 7) % V for t in range(T + 1)])
    return rows


def main():
    ap = peer.parser(__doc__, "cpu", "cpu, cuda:N (opencl:N: no peer)", seed=0)
    ap.add_argument("--n-layer", type=int, default=4)
    ap.add_argument("--n-head", type=int, default=4)
    ap.add_argument("--n-embd", type=int, default=128)
    ap.add_argument("--n-positions", type=int, default=64)
    ap.add_argument("--vocab-size", type=int, default=256)
    ap.add_argument("--batch-size", type=int, default=12)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup-steps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--text", default=None, help="train on this file's bytes")
    a = ap.parse_args()
    peer.check_device(a.device, ("cpu", "cuda"))

    def measure():
        import torch
        import torch.nn as nn
        import torch.nn.functional as F
        torch.set_num_threads(a.threads)
        torch.manual_seed(a.seed)
        dev = torch.device(a.device)
        sync = peer.syncer(torch, dev)
        E, H, L, P, V = a.n_embd, a.n_head, a.n_layer, a.n_positions, a.vocab_size
        if hasattr(F, "scaled_dot_product_attention"):
            form = "public"

            def attention(q, k, v):
                return F.scaled_dot_product_attention(q, k, v, is_causal=True)
        elif hasattr(F, "_scaled_dot_product_attention"):
            form = "private"

            def attention(q, k, v):
                return F._scaled_dot_product_attention(q, k, v, None, 0.0, False, True)[0]
        else:
            form = "math"

            def attention(q, k, v):
                T = q.shape[-2]
                s = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
                mask = torch.ones(T, T, dtype=torch.bool, device=q.device).tril()
                return torch.softmax(s.masked_fill(~mask, float("-inf")), dim=-1) @ v

        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.ln_1 = nn.LayerNorm(E, eps=1e-5)
                self.c_attn = nn.Linear(E, 3 * E)
                self.attn_proj = nn.Linear(E, E)
                self.ln_2 = nn.LayerNorm(E, eps=1e-5)
                self.c_fc = nn.Linear(E, 4 * E)
                self.mlp_proj = nn.Linear(4 * E, E)

            def forward(self, x):
                B, T, _ = x.shape
                q, k, v = self.c_attn(self.ln_1(x)).split(E, dim=2)
                q, k, v = (t.view(B, T, H, E // H).transpose(1, 2) for t in (q, k, v))
                y = attention(q, k, v).transpose(1, 2).contiguous().view(B, T, E)
                x = x + self.attn_proj(y)
                return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))

        class GPT2(nn.Module):
            def __init__(self):
                super().__init__()
                self.wte = nn.Embedding(V, E)
                self.wpe = nn.Embedding(P, E)
                self.h = nn.ModuleList(Block() for _ in range(L))
                self.ln_f = nn.LayerNorm(E, eps=1e-5)
                for name, p in self.named_parameters():
                    if name.endswith("bias"):
                        nn.init.zeros_(p)
                    elif "ln_" in name:
                        nn.init.ones_(p)
                    else:
                        std = 0.02 / math.sqrt(2 * L) if name.endswith("proj.weight") else 0.02
                        nn.init.normal_(p, 0.0, std)

            def forward(self, ids):
                T = ids.shape[1]
                x = self.wte(ids) + self.wpe(torch.arange(T, device=ids.device))
                for blk in self.h:
                    x = blk(x)
                return F.linear(self.ln_f(x), self.wte.weight)  # the lm_head tied to wte

        model = GPT2().to(dev)
        model.train()
        # every parameter decayed, as cuttle's AdamW does
        opt = torch.optim.AdamW(model.parameters(), lr=a.lr, weight_decay=a.weight_decay)
        text = None
        if a.text is not None:
            with open(a.text, "rb") as f:
                text = f.read()
            if len(text) < P + 1:
                raise ValueError(f"--text {a.text} holds {len(text)} bytes; {P + 1} needed")

        kernel = None

        def kernel_of(q, k, v):
            if form == "private":
                return "math (torch 1.x's private F._scaled_dot_product_attention)"
            if form == "math":
                return "math (written here: this torch has no scaled_dot_product_attention)"
            try:
                return KERNELS.get(int(torch._fused_sdp_choice(q, k, v, None, 0.0, True)), "unknown")
            except Exception:  # noqa: BLE001: a torch without the query
                return "unknown (F.scaled_dot_product_attention)"

        def step(s, read_loss):
            nonlocal kernel
            rows = torch.tensor(batches(a, s, text), dtype=torch.int64).to(dev)
            ids, tgt = rows[:, :-1], rows[:, 1:].reshape(-1)
            if kernel is None:
                with torch.no_grad():
                    q = torch.zeros(a.batch_size, H, P, E // H, device=dev)
                    kernel = kernel_of(q, q, q)
            logits = model(ids)
            loss = F.cross_entropy(logits.reshape(-1, V), tgt)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            return loss.item() if read_loss else None

        total = a.warmup_steps + a.steps
        first = last = None
        t0 = 0.0
        for s in range(total):
            if s == a.warmup_steps:
                sync()
                t0 = time.perf_counter()
            got = step(s, s == 0 or s == total - 1)
            if s == 0:
                first = got
            if s == total - 1:
                last = got
        sync()
        secs = time.perf_counter() - t0
        out = {"tokens_per_s": a.batch_size * P * a.steps / secs, "ms_per_step": 1e3 * secs / a.steps,
               "first_loss": first, "last_loss": last,
               "params": sum(p.numel() for p in model.parameters()), "kernel": kernel}
        return torch, dev, out

    peer.run("gpt2_train", measure)


if __name__ == "__main__":
    main()
