#!/usr/bin/env bash
# The native kernels' checks on Arm without an Arm machine (by hand, not in CI: ~4 min first, ~1 GB): an aarch64
# Python from Debian's packages and torch's aarch64 wheel from PyPI, run under qemu-aarch64 (user mode), with
# Debian's aarch64 cross compiler standing in for the Arm machine's cc (-march=native -> -mcpu=neoverse-n1).
# Needs root, apt-get and PyPI. Usage: bash tests/native/qemu_arm.sh [pytest args]
# (default: tests/native tests/fl/test_dense32.py tests/fl/test_engine.py tests/models/test_cnn_ops.py)
set -euo pipefail
cd "$(dirname "$0")/../.."
work="${FEDEVO_ARM_DIR:-/tmp/fedevo-arm}"
mkdir -p "$work/deb" "$work/root" "$work/cache"
if ! command -v qemu-aarch64 >/dev/null || ! command -v aarch64-linux-gnu-gcc >/dev/null; then
  apt-get install -y -qq qemu-user gcc-aarch64-linux-gnu libc6-dev-arm64-cross
fi
if [ ! -x "$work/root/usr/bin/python3.11" ]; then
  dpkg --print-foreign-architectures | grep -qx arm64 || { dpkg --add-architecture arm64; apt-get update -qq; }
  (cd "$work/deb" && for p in python3.11-minimal libpython3.11-minimal libpython3.11-stdlib libc6 zlib1g libexpat1 \
      libffi8 libssl3 libbz2-1.0 liblzma5 libsqlite3-0 libncursesw6 libtinfo6 libreadline8 libuuid1 libgcc-s1 \
      libstdc++6 libgomp1 libcrypt1; do apt-get download -qq "$p:arm64"; done)
  for f in "$work"/deb/*.deb; do dpkg -x "$f" "$work/root"; done
fi
if [ ! -d "$work/site/torch" ]; then
  pip install -q --no-deps --only-binary=:all: --python-version 3.11 --implementation cp \
    --platform manylinux2014_aarch64 --platform manylinux_2_28_aarch64 --target "$work/site" \
    torch==2.9.1 numpy scipy pytest pluggy iniconfig packaging pygments filelock typing_extensions sympy mpmath \
    networkx jinja2 markupsafe fsspec pytest-timeout
fi
cat >"$work/cc" <<'EOF'
#!/bin/sh
for a in "$@"; do [ "$a" = "-march=native" ] && a="-mcpu=neoverse-n1"; set -- "$@" "$a"; shift; done
exec aarch64-linux-gnu-gcc "$@"
EOF
chmod +x "$work/cc"
[ $# -gt 0 ] || set -- tests/native tests/fl/test_dense32.py tests/fl/test_engine.py tests/models/test_cnn_ops.py
CC="$work/cc" FEDEVO_CACHE="$work/cache" PYTHONPATH="$work/site:$PWD" \
  qemu-aarch64 -L "$work/root" "$work/root/usr/bin/python3.11" -m pytest -o addopts= -q -p no:cacheprovider -rs "$@"
