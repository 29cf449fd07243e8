#!/usr/bin/env bash
# Issue #37's GPU figures in one device call (a lent GPU has ~15 minutes for a whole session, start included):
# the machine, the CUDA tests, the reference round with every opt-in, and the fashion_mlp_dp generation of 20
# (drawn trust gene, then central for all), each step under its own timeout so that one slow step cannot eat
# the others' time. Writes one file per step under $OUT (the device tool brings it back).
#
# Before the call, on this machine (Fashion-MNIST's IDX files travel with the call; .gpu-data/ is git-ignored):
#     mkdir -p .gpu-data && cp /usr/share/datasets/fashion-mnist/*.gz .gpu-data/
# The device call:  bash benchmarks/gpu_session.sh     (carry [".gpu-data"], timeout_s 600)
# At most 540 s of steps (about 5 minutes on an H100 by the 2026-11-24/25 timings); the device machine has torch,
# not Ray nor pymoo, so the tests that need them are left out.
set -uo pipefail
OUT="${OUT:-/tmp/fedevo-gpu}"
DATA="${FEDEVO_GPU_DATA:-.gpu-data}"
mkdir -p "$OUT"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"  # this checkout's fedevo, installed or not
step() {  # step NAME SECONDS COMMAND...: run it, its output to $OUT/NAME.txt, its status and time appended
  local name=$1 secs=$2; shift 2
  local t0=$SECONDS
  timeout -k 10 "$secs" "$@" > "$OUT/$name.txt" 2>&1
  echo "# exit $? after $((SECONDS - t0)) s: $*" >> "$OUT/$name.txt"
  tail -n 3 "$OUT/$name.txt"
}
{
  date -u
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  lscpu | grep -E "Model name|^CPU\(s\)"
  python3 -c "import torch; print('torch', torch.__version__, 'CUDA', torch.version.cuda)"
  python3 -c "import fedevo, dp_accounting, cryptography, scipy; print('fedevo from', fedevo.__file__)"
  git log -1 --format='fedevo %h %s' 2>/dev/null || true
} > "$OUT/machine.txt" 2>&1
cat "$OUT/machine.txt"
step tests 110 python3 -m pytest -o addopts='' -q -rs -m cuda -k "not ray and not evaluate_json" \
  tests/fl/test_cuda.py tests/fl/test_cuda_population.py tests/fl/test_stacked_schedule.py tests/fl/test_finite.py
step round 120 python3 benchmarks/cuda_population.py --repeats 7 --no-generation --tf32 --schedule-device
# the default round's phases with the schedule drawn in threads (the default) and in one: on a 2-core CPU the
# threads cost more than they save (2.8 ms in one thread, 4.5 ms with a fresh pool of two), and the H100's
# "bucket/plan" phase took 25 ms of a 43 ms round
step phases 60 bash -c \
  "python3 benchmarks/cuda_round_phases.py && FEDEVO_PLAN_THREADS=1 python3 benchmarks/cuda_round_phases.py"
step generation 170 python3 benchmarks/cuda_population.py --no-round --no-today --data-dir "$DATA"
step generation-central 90 python3 benchmarks/cuda_population.py --no-round --no-today --trust central \
  --data-dir "$DATA"
