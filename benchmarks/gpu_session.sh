#!/usr/bin/env bash
# Issue #37's GPU figures in device calls (a lent GPU has ~15 minutes for a whole session, starts included): the
# machine, the CUDA tests, the fused masked update against the plain one, the reference round with every opt-in,
# the fashion_mlp_dp generation of 20 (drawn trust gene, then central for all) and `fedevo search` batched on the
# GPU, each step under its own timeout so that one slow step cannot eat the others' time (595 s in all for the
# default steps: a device call's limit is 600 s; on 2026-11-27 they took tests 105 s, round 59, generation 64,
# generation-central 45, a 1-generation search 28: results-2026-11-27-cuda-h100.txt). Writes one file per step under
# $OUT (the device tool brings it back; at most 8 files come back, so all.txt is the one to keep), and all of them in
# order under headers to $OUT/all.txt (the draft of a results file). A warm machine stays 30 s after a call: the
# named-only steps fit later calls made at once (2026-11-27: three more calls in the session's 15 minutes).
#
#     bash benchmarks/gpu_session.sh                      # the default steps (about 6 minutes on an H100)
#     bash benchmarks/gpu_session.sh round generation     # only the named steps (and the machine)
#     bash benchmarks/gpu_session.sh generation-opt-ins   # a step the default leaves out (named only; also
#                                                         # phases, window, plan, accountant, secagg,
#                                                         # profile-secagg, generation-busy, generation-step,
#                                                         # generation-cnn, prefetch, convoy, graphs)
#
# Before the first call, on this machine (both folders are git-ignored; the device tool carries them):
#     mkdir -p .gpu-data && cp /usr/share/datasets/fashion-mnist/*.gz .gpu-data/       # Fashion-MNIST's IDX files
#     python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#       --platform manylinux_2_34_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
#       -d .whl dp-accounting==0.6.0 cryptography==50.0.2 cffi==2.1.1 pycparser==3.12 \
#       pymoo==0.6.2 moocore==0.3.2 autograd==1.9.1 alive-progress==3.3.0 about-time==4.2.1 graphemeu==0.7.2 \
#       dill==0.4.1 platformdirs==4.14.8       # absent from the device image (pymoo's for the search step and tests)
#     echo /.whl/ >> .git/info/exclude
# The device call:  bash benchmarks/gpu_session.sh     (carry [".gpu-data", ".whl"], timeout_s 600)
# What travels (tracked files and both folders) must stay under the device tool's 64 MiB: move benchmarks/results/
# and experiments/results/ (their pages, ~23 MB, which no step reads) aside for the call, and back after it.
# The device image has torch, Triton, joblib, scipy; not Ray, so the tests that need it are left out.
set -uo pipefail
OUT="${OUT:-/tmp/fedevo-gpu}"
DATA="${FEDEVO_GPU_DATA:-.gpu-data}"
mkdir -p "$OUT"
if [ -d .whl ]; then  # a failed install (another Python on the device, say) costs the steps that need them only
  if python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
      .whl/*.whl; then
    export PYTHONPATH=/tmp/site
  else
    echo "warning: the wheels in .whl did not install ($(python3 -V)); the steps that need them will fail"
  fi
fi
export PYTHONUNBUFFERED=1  # a step stopped at its timeout keeps what it printed
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"  # this checkout's fedevo, installed or not
WANT=" ${*:-tests fused round fusion generation generation-central search} "
step() {  # step NAME SECONDS COMMAND...: run it (if wanted), its output to $OUT/NAME.txt, its status and time appended,
  # and the whole to $OUT/all.txt under a header (the draft of a results file: machine first, steps in order)
  local name=$1 secs=$2; shift 2
  [[ "$WANT" == *" $name "* ]] || return 0
  local t0=$SECONDS
  timeout -k 10 "$secs" "$@" > "$OUT/$name.txt" 2>&1
  echo "# exit $? after $((SECONDS - t0)) s: $*" >> "$OUT/$name.txt"
  { echo; echo "## $name: $*"; cat "$OUT/$name.txt"; } >> "$OUT/all.txt"
  tail -n 4 "$OUT/$name.txt"
}
{
  date -u
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  lscpu | grep -E "Model name|^CPU\(s\)"
  python3 -c "import torch; print('torch', torch.__version__, 'CUDA', torch.version.cuda)"
  python3 -c "import fedevo, dp_accounting, cryptography, scipy, joblib; print('fedevo from', fedevo.__file__)"
  git log -1 --format='fedevo %h %s' 2>/dev/null || true
} > "$OUT/machine.txt" 2>&1
cat "$OUT/machine.txt" | tee "$OUT/all.txt"
step tests 135 python3 -m pytest -o addopts='' -q -rs -m cuda -k "not ray and not evaluate_json" \
  tests/fl/test_cuda.py tests/fl/test_cuda_population.py tests/fl/test_stacked_schedule.py tests/fl/test_finite.py \
  tests/fl/test_stacked_fused.py tests/fl/test_stacked_update.py tests/fl/test_stacked_hooks.py \
  tests/fl/test_cuda_population_cnn.py tests/fl/test_stacked_window.py tests/fl/test_stacked_bias.py \
  tests/models/test_user_model_cuda.py \
  tests/searching/test_batched_search.py
# the fused masked weight update (fl/stacked_update.py) against the plain update: one layer's step, and the
# reference round dense and SET-masked with FEDEVO_CUDA_FUSED_UPDATE off / masked / all, side by side
step fused 75 python3 benchmarks/cuda_fused_update.py --window 4
# the reference round with every opt-in, each also with the first layer's updates once a window of 4 steps
# (FEDEVO_FIRST_LAYER_WINDOW, fl/stacked_window.py: 14.1 ms with the device schedule and TF32 on 2026-11-27, the best
# so far) and each line without torch_compile also with the biases inside the weights (FEDEVO_BIAS_IN_WEIGHTS,
# fl/stacked_bias.py: 6 of a step's ~27 kernels fewer; not yet timed): issue #37's 10x is <= 13.0 ms
step round 100 python3 benchmarks/cuda_population.py --repeats 7 --no-generation --tf32 --schedule-device --compile \
  --window 4 --bias-in-weights
# the reference round's step loop as fedevo runs it against two ways without bias kernels (cuda_step_fusion.py:
# each bias sum a GEMM with ones; the biases inside the weights, the "augmented" layout), graph replays with the
# schedule drawn on the GPU and TF32, and the fastest one's kernels: where issue #37's last 1.1 ms may come from
step fusion 40 python3 benchmarks/cuda_step_fusion.py --variants fedevo,biasgemm,augmented
# named only: the window's length scanned (2, 4, 8) with every opt-in, today's path left out
step window 100 python3 benchmarks/cuda_population.py --repeats 7 --no-generation --no-today --tf32 \
  --schedule-device --compile --window 2 4 8
# named only (the default list makes room for `fused`): where the best round so far goes (plan, load, step loop,
# updates; the step loop's kernels): the schedule drawn on the GPU, TF32, the first layer once a window of 4 steps
# (14.1 ms on the H100 on 2026-11-27, 1.1 ms from issue #37's 13 ms; 2026-11-27's `phases` ran another mix)
step phases 45 env FEDEVO_SCHEDULE=device FEDEVO_CUDA_TF32=1 FEDEVO_FIRST_LAYER_WINDOW=4 \
  python3 benchmarks/cuda_round_phases.py
# named only (measured on an H100 host on 2026-11-27): the host-side pieces a generation waits on, side by side on
# this host's CPU: the buckets' plan the previous way against the native draws; the ε in threads against workers
step plan 30 python3 benchmarks/stacked_plan.py
step accountant 30 python3 benchmarks/accountant_offload.py
# named only: where a secure-aggregation member's host time goes per coordinate (gather and copy, DDG encoding, ...)
step secagg 30 python3 benchmarks/secagg_add_cost.py
# both generations also with every width of one depth in one bucket (FEDEVO_WIDTH_CLASSES=depth: 3 buckets instead
# of 9, fewer launches, more padding; not yet timed)
step generation 95 python3 benchmarks/cuda_population.py --no-round --no-today --bias-in-weights \
  --width-classes depth --data-dir "$DATA"
step generation-central 70 python3 benchmarks/cuda_population.py --no-round --no-today --trust central \
  --bias-in-weights --threads 4 --width-classes depth --data-dir "$DATA"
# `fedevo search` itself (in-process, pymoo's NSGA-III) on the GPU, generations of 20 batched against the same search
# one evaluation at a time, and the slowest member's own time (batched_search.py; needs the pymoo wheels). Two
# generations: the first pays the process's first batch (the accountant's workers start, Triton compiles), the
# second is the steady state (2026-11-27 ran only the first: 6.7 s batched, 9.0x its slowest member)
step search 80 python3 benchmarks/batched_search.py --problem fashion_mlp_dp --pop 20 --gen 2 --data-dir "$DATA"
# named only: the slowest member alone in the drawn generations (#12, secure aggregation) under cProfile (its host time)
step profile-secagg 40 python3 benchmarks/cuda_population.py --no-round --no-generation --profile 12 --data-dir "$DATA"
# named only (not in the default list: the default's steps fill one device call): the generation with the schedule
# drawn on the GPU and TF32 matmuls (a third of the fp32 arithmetic's time; torch_compile is left out: the buckets'
# client counts change from round to round, and each new shape would compile)
step generation-opt-ins 90 env FEDEVO_SCHEDULE=device FEDEVO_CUDA_TF32=1 python3 benchmarks/cuda_population.py \
  --no-round --no-today --trust central --data-dir "$DATA"
# named only: the central generation, then its batch once more under torch.profiler: how busy the GPU was (its
# kernels' time against the wall) and its top kernels: whether the host or the arithmetic holds the batch up
step generation-busy 100 python3 benchmarks/cuda_population.py --no-round --no-today --trust central --busy \
  --data-dir "$DATA"
# named only: a fashion_cnn generation of 10 (2 rounds) as one batched program (fl/stacked_cnn.py) against its
# individuals one after another (the way before 2026-11-27: fl/device.py each), side by side, and each alone
step generation-cnn 150 python3 benchmarks/cnn_generation.py --generation 10 --rounds 2 --repeats 1 --tf32 \
  --data-dir "$DATA"
# named only: the central generation's planned ε computed by the accountant's workers while it trains (the default
# on the CPU only since 2026-11-27: 0.90x on the H100)
# against after its training (the way before 2026-11-27), side by side
step prefetch 90 python3 benchmarks/eps_prefetch.py --problem fashion_mlp_dp --generation 20 --rounds 5 --repeats 3 \
  --device cuda --data-dir "$DATA"
# named only: what a pure-Python thread and the run sides cost a loop of small torch ops on this host's CPU (the GIL)
step convoy 40 python3 benchmarks/gil_convoy.py
# named only: a 40-round run (a retrain's length) with the stacked trainer's CUDA graphs (its buckets' shapes rounded
# up so that they recur, since 2026-11-27) against the same run eager, side by side
step graphs 120 python3 benchmarks/cuda_graph_rounds.py --rounds 40 --repeats 3 --data-dir "$DATA"
# named only: a generation of fashion_mlp_step (seed 004's per-step LDP, the step mechanism's clipping and noise
# in the stacked trainer since 2026-11-27), batch against each member alone
step generation-step 100 python3 benchmarks/cuda_population.py --no-round --no-today --problem fashion_mlp_step \
  --data-dir "$DATA"
