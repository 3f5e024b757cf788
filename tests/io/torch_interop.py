"""tests/io/torch_interop.py: the PyTorch side of tests/io/test_interop_torch.c.

  python3 torch_interop.py load CKPT OUT   build cuttle's cnn in PyTorch, load_state_dict the model
                                           part of the cuttle checkpoint CKPT (dropping the
                                           "optimizer." keys), and save its output on the fixed
                                           input as OUT {"output"}
  python3 torch_interop.py save CKPT       save a freshly initialized PyTorch cnn's state_dict to
                                           CKPT, with its output on the fixed input as "expected"
The fixed input x[i] = sin(0.01 i) of shape (4, 1, 28, 28) is computed the same way in the C test.
"""
import sys

import torch
from torch import nn
from safetensors.torch import load_file, save_file


def cnn():
    return nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(32, 64, 3, padding=1),
                         nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(3136, 128), nn.ReLU(), nn.Linear(128, 10))


def fixed_input():
    return torch.sin(0.01 * torch.arange(4 * 28 * 28, dtype=torch.float64)).float().reshape(4, 1, 28, 28)


def main():
    mode, path = sys.argv[1], sys.argv[2]
    net = cnn().eval()
    if mode == "load":
        sd = load_file(path)
        net.load_state_dict({k: v for k, v in sd.items() if not k.startswith("optimizer.")})  # strict=True
        with torch.no_grad():
            save_file({"output": net(fixed_input()).contiguous()}, sys.argv[3])
    else:
        torch.manual_seed(7)
        net = cnn().eval()
        sd = {k: v.contiguous() for k, v in net.state_dict().items()}
        with torch.no_grad():
            sd["expected"] = net(fixed_input()).contiguous()
        save_file(sd, path)


if __name__ == "__main__":
    main()
