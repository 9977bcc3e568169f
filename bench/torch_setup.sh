#!/usr/bin/env bash
# Installs what bench/torch_dlrm.py and bench/quality.py need: Debian's
# PyTorch (CPU) and NumPy, used only by the reference-framework check of
# bench/quality.py, never by `make test` or `make demo`. Root (or sudo).
set -euo pipefail
if /usr/bin/python3 -c 'import torch, numpy' 2>/dev/null; then exit 0; fi
SUDO=""
[[ $(id -u) -ne 0 ]] && SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends python3-torch python3-numpy
