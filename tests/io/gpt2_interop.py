#!/usr/bin/env python3
"""The transformers side of tests/io/test_interop_gpt2.c (run by $CUTTLE_PYTHON, the build folder's
venv with transformers from PyPI):

  write DIR         a GPT2LMHeadModel of the test's small config with transformers' own random
                    initialization (torch.manual_seed(0)), saved by save_pretrained to DIR/hf; the
                    same weights in the hub's original layout (GPT2Model's keys, no "transformer.",
                    with the attn.bias and attn.masked_bias buffers) in DIR/hub; and DIR/hf_logits
                    .safetensors: "ids" (8, 20) and that model's "logits" for them.
  check DIR         GPT2LMHeadModel.from_pretrained(DIR/cuttle) (what cuttle saved) must give, for
                    DIR/cuttle_logits.safetensors' "ids", cuttle's "logits" within 1e-4, and
                    generate(do_sample=False) from its "prompt" must give cuttle's "generated"
                    tokens exactly. Prints both differences; exits 1 on a mismatch."""
import os
import sys

import torch
from safetensors.torch import load_file, save_file
from transformers import GPT2Config, GPT2LMHeadModel

CONFIG = dict(vocab_size=101, n_positions=32, n_embd=32, n_layer=2, n_head=4, resid_pdrop=0.0, embd_pdrop=0.0,
              attn_pdrop=0.0)


def write(d):
    torch.manual_seed(0)
    m = GPT2LMHeadModel(GPT2Config(**CONFIG)).eval()
    m.save_pretrained(os.path.join(d, "hf"))
    hub = os.path.join(d, "hub")
    os.makedirs(hub, exist_ok=True)
    m.config.to_json_file(os.path.join(hub, "config.json"))
    sd = {k: v.contiguous() for k, v in m.transformer.state_dict().items()}
    P = CONFIG["n_positions"]
    for i in range(CONFIG["n_layer"]):  # the buffers the hub's original file carries
        sd[f"h.{i}.attn.bias"] = torch.tril(torch.ones(P, P, dtype=torch.uint8)).view(1, 1, P, P)
        sd[f"h.{i}.attn.masked_bias"] = torch.tensor(-1e4)
    save_file(sd, os.path.join(hub, "model.safetensors"), metadata={"format": "pt"})
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, CONFIG["vocab_size"], (8, 20), generator=g)
    with torch.no_grad():
        logits = m(ids).logits
    save_file({"ids": ids, "logits": logits.contiguous()}, os.path.join(d, "hf_logits.safetensors"))
    return 0


def check(d):
    # Debian's torch 1.13 cannot import torch.distributed.fsdp under Python 3.11 (a dataclass with a
    # mutable default), which generate() asks whether the model is wrapped in: it is not.
    import transformers.generation.utils as gen_utils
    if hasattr(gen_utils, "is_fsdp_managed_module") and torch.__version__ < "2":
        gen_utils.is_fsdp_managed_module = lambda module: False
    m = GPT2LMHeadModel.from_pretrained(os.path.join(d, "cuttle")).eval()
    t = load_file(os.path.join(d, "cuttle_logits.safetensors"))
    with torch.no_grad():
        logits = m(t["ids"]).logits
        diff = float((logits - t["logits"]).abs().max())
        prompt = t["prompt"]
        out = m.generate(prompt, do_sample=False, max_new_tokens=t["generated"].shape[1] - prompt.shape[1],
                         attention_mask=torch.ones_like(prompt), pad_token_id=0)
    same = out.shape == t["generated"].shape and bool((out == t["generated"]).all())
    print(f"gpt2 logits of 8 sequences: max |cuttle - transformers| = {diff:.3g} (tol 1e-4)")
    print(f"greedy generation: transformers {out[0].tolist()}")
    print(f"                   cuttle       {t['generated'][0].tolist()}  {'equal' if same else 'DIFFERENT'}")
    return 0 if diff <= 1e-4 and same else 1


if __name__ == "__main__":
    mode, d = sys.argv[1], sys.argv[2]
    sys.exit(write(d) if mode == "write" else check(d))
