#!/bin/sh
# Make the Python that the interop tests run (tests/io/test_interop_*.c): DIR/venv, a virtual
# environment with Debian's PyTorch and numpy (python3-torch, installed with apt through deps.sh),
# Debian's torchvision 0.14 and PIL, which match that PyTorch (python3-torchvision: about 3 MB and 6
# small packages; tests/data/test_interop_imagefolder.c compares the image folder with ImageFolder) and,
# from PyPI, safetensors, transformers and tensorboard (Debian 12 packages none: tensorboard's EventAccumulator
# reads cuttle's event files in tests/io/test_interop_tensorboard.c, and torch.utils.tensorboard
# needs it). tests/CMakeLists.txt points
# CUTTLE_PYTHON at DIR/venv/bin/python by default, so DIR is the build folder.
#   scripts/python_env.sh DIR
# Only what is missing is installed, so a second run costs one import check.
set -eu
cd "$(dirname "$0")/.."
dir="${1:?usage: scripts/python_env.sh BUILD_DIR}"
./scripts/deps.sh python3-torch python3-venv python3-torchvision
venv="$dir/venv"
# Debian's interpreter by its full path: the python3 first on PATH may be another one (pyenv, conda)
# that does not see /usr/lib/python3/dist-packages, where python3-torch puts torch.
if [ ! -x "$venv/bin/python" ]; then
  mkdir -p "$dir"
  /usr/bin/python3 -m venv --system-site-packages "$venv"
fi
if ! "$venv/bin/python" -c "import safetensors" >/dev/null 2>&1; then
  echo "cuttle: installing safetensors into $venv"
  # The version the interop tests were written against, so that a new release cannot change them
  # unseen.
  "$venv/bin/pip" install --quiet --disable-pip-version-check "safetensors==0.8.0"
fi
if ! "$venv/bin/python" -c "import tensorboard" >/dev/null 2>&1; then
  echo "cuttle: installing tensorboard into $venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "tensorboard==2.19.0"
fi
if ! "$venv/bin/python" -c "import transformers" >/dev/null 2>&1; then
  # GPT-2's interop (tests/io/test_interop_gpt2.c: GPT2LMHeadModel.from_pretrained and generate on
  # cuttle's files, save_pretrained for cuttle to read), pinned to a release that runs on Debian's
  # torch 1.13 (checked); it brings tokenizers, huggingface-hub and regex from PyPI.
  echo "cuttle: installing transformers into $venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "transformers==4.46.3"
fi
# Fail here, with the interpreter's own message, rather than in the tests.
"$venv/bin/python" -c "import numpy, torch, safetensors.numpy, safetensors.torch, tensorboard, torch.utils.tensorboard, torchvision, PIL, transformers"
