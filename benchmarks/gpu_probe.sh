#!/usr/bin/env bash
# A short device call (issue #37): where a central fashion_mlp_dp generation's time goes on the GPU host.
# carry [".gpu-data", ".whl"] (Fashion-MNIST's IDX files; dp-accounting's and cryptography's wheels: see gpu_session.sh)
set -uo pipefail
OUT="${OUT:-/tmp/fedevo-gpu}"
DATA="${FEDEVO_GPU_DATA:-.gpu-data}"
mkdir -p "$OUT"
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site || exit 1
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
step() {
  local name=$1 secs=$2; shift 2
  local t0=$SECONDS
  timeout -k 10 "$secs" "$@" > "$OUT/$name.txt" 2>&1
  echo "# exit $? after $((SECONDS - t0)) s: $*" >> "$OUT/$name.txt"
  tail -n 40 "$OUT/$name.txt"
}
step generation-central 150 python3 benchmarks/cuda_population.py --no-round --no-today --trust central \
  --data-dir "$DATA"
