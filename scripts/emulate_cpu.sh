#!/usr/bin/env bash
# Run a command as if on a CPU with fewer vector instructions, to catch outputs that depend on the CPU.
#
#   scripts/emulate_cpu.sh LEVEL COMMAND [ARG ...]
#   scripts/emulate_cpu.sh below COMMAND ...   # one level below what this CPU offers (CI's second run)
#
# LEVEL is avx2 (an AVX2 machine without AVX-512) or default (SSE4 only, no AVX). torch, oneDNN, MKL
# and numpy pick their kernels, and so the order of their floating-point reductions, by the instructions a
# CPU offers; these variables make them pick the kernels of the lower level:
#   ATEN_CPU_CAPABILITY      torch's own vectorized kernels (printed as torch's "CPU capability")
#   ONEDNN_MAX_CPU_ISA       oneDNN (torch's convolutions and some matrix products)
#   MKL_ENABLE_INSTRUCTIONS  MKL (torch's BLAS on x86)
#   NPY_DISABLE_CPU_FEATURES numpy's dispatched loops (exp, log, reductions); numpy 2.4 names its groups
#                            X86_V4 (AVX-512) and X86_V3 (AVX2), numpy 2.2 the single features: both given
# OpenBLAS (numpy's matrix products) is left alone: some machines here set OPENBLAS_CORETYPE already, because
# older OpenBLAS builds compute wrong results on their CPUs.
# The command runs with these variables; first the script prints what torch and numpy report, so a log shows
# that the settings took effect (it exits 2 if torch does not report the level asked for).
set -euo pipefail
if [ $# -lt 2 ]; then
  sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi
level=$1; shift
PY=${PYTHON:-python}
if [ "$level" = below ]; then
  native=$($PY -c "import torch; print(torch.backends.cpu.get_cpu_capability())")
  case "$native" in
    AVX512*) level=avx2 ;;
    *) level=default ;;
  esac
  echo "== this CPU: torch capability $native; emulating $level"
fi
AVX512_FEATURES="X86_V4 AVX512F AVX512CD AVX512_KNL AVX512_KNM AVX512_SKX AVX512_CLX AVX512_CNL AVX512_ICL AVX512_SPR"
case "$level" in
  avx2)
    export ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 MKL_ENABLE_INSTRUCTIONS=AVX2
    export NPY_DISABLE_CPU_FEATURES="$AVX512_FEATURES"
    expected=AVX2 ;;
  default)
    export ATEN_CPU_CAPABILITY=default ONEDNN_MAX_CPU_ISA=SSE41 MKL_ENABLE_INSTRUCTIONS=SSE4_2
    export NPY_DISABLE_CPU_FEATURES="$AVX512_FEATURES X86_V3 AVX2 FMA3 AVX F16C"
    expected=DEFAULT ;;
  *)
    echo "emulate_cpu.sh: unknown level '$level'; allowed: avx2, default, below" >&2
    exit 2 ;;
esac
$PY -W ignore - "$expected" <<'EOF'
import sys

import numpy
import torch
from numpy._core._multiarray_umath import __cpu_dispatch__, __cpu_features__   # what numpy.show_runtime reads

reported = torch.backends.cpu.get_cpu_capability()
found = [name for name in __cpu_dispatch__ if __cpu_features__[name]]   # the loops numpy will dispatch to
print(f"== emulated CPU: torch {torch.__version__} capability {reported}; "
      f"numpy {numpy.__version__} dispatches to {' '.join(found) or 'its baseline only'}")
sys.exit(0 if reported.upper() == sys.argv[1] else 2)
EOF
exec "$@"
