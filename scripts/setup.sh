#!/usr/bin/env bash
# Set up a fresh Linux machine for dfl-book: system packages (when we may install them),
# a virtual environment in .venv, and the package with its test and book extras.
#   DFL_TORCH="torch==X torchvision==Y"  install this torch first (CI uses the build on its disk)
#   DFL_TORCH_INDEX=URL                  install torch and torchvision (or $DFL_TORCH) from this package
#                                        index first; https://download.pytorch.org/whl/cpu is the CPU-only
#                                        build (about 0.7 GB installed, instead of the 4.4 GB of the CUDA
#                                        build that PyPI's Linux wheels pull in)
#   DFL_REQUIRE_ALL=1                    fail instead of skipping optional system packages
set -euo pipefail
cd "$(dirname "$0")/.."

# dataset-fashion-mnist: the original Fashion-MNIST IDX files (no download at run time);
# chromium + libjs-mathjax: the offline browser test of the book (tests/test_book_site.py);
# python3-venv: Debian and Ubuntu ship python3 without the venv module's pip (ensurepip)
SYSTEM_PACKAGES="dataset-fashion-mnist chromium libjs-mathjax python3-venv"
if command -v apt-get >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then SUDO=""; elif command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else SUDO="none"; fi
  if [ "$SUDO" != none ]; then
    echo "== apt-get install $SYSTEM_PACKAGES"
    if ! { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $SYSTEM_PACKAGES >/dev/null; }; then
      # one package a distribution lacks (Ubuntu ships chromium as a snap) must not keep the others out
      missing=""
      for pkg in $SYSTEM_PACKAGES; do
        DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "$pkg" >/dev/null 2>&1 || missing="$missing $pkg"
      done
      if [ -n "$missing" ]; then
        echo "warning: could not install:$missing (the tests that need them are skipped; without" \
          "dataset-fashion-mnist, torchvision downloads Fashion-MNIST)"
        [ "${DFL_REQUIRE_ALL:-0}" = 1 ] && exit 1
      fi
    fi
  else
    echo "note: not root and no sudo: skipping $SYSTEM_PACKAGES"
  fi
fi

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "== creating .venv with $($PY --version)"
  $PY -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip
TORCH=${DFL_TORCH:-}
if [ -n "${DFL_TORCH_INDEX:-}" ]; then
  # a torch already installed from here satisfies the package's own "torch>=" requirement below
  TORCH=${TORCH:-torch torchvision}
  echo "== pip install $TORCH --index-url $DFL_TORCH_INDEX"
  .venv/bin/python -m pip install -q --index-url "$DFL_TORCH_INDEX" $TORCH
elif [ -n "$TORCH" ]; then
  echo "== pip install $TORCH"
  .venv/bin/python -m pip install -q $TORCH
fi
echo "== pip install -e .[dev]"
.venv/bin/python -m pip install -q -e ".[dev]"

# npm's katex, into build/node_modules: the browser test of the website (tests/test_book_site.py) answers the
# pages' request for KaTeX's stylesheet and fonts on a CDN from it; 0.15.2 is the version the book theme loads
KATEX=katex@0.15.2
echo "== npm install $KATEX into build/node_modules"
if ! { command -v npm >/dev/null 2>&1 && npm install --no-save --no-audit --no-fund --silent --prefix build "$KATEX"; }; then
  echo "warning: could not npm install $KATEX into build/node_modules (the website's browser test will skip)"
  [ "${DFL_REQUIRE_ALL:-0}" = 1 ] && exit 1
fi
echo "== ready: .venv/bin/python -m dfl_core run --help"
