#!/usr/bin/env bash
# A CLI walkthrough: planning a 70B run from scratch. Each command is one napkin question.
# Run it with: bash examples/walkthrough.sh   (NAPKIN="python -m napkin" works too)
set -euo pipefail
napkin=${NAPKIN:-napkin}

# 1. How long on 1024 H100s at MFU 0.35-0.5, and what does it cost?
$napkin train-time --params 70B --tokens 15T --gpus 1024 --mfu 0.35:0.5 --price 2.49

# 2. How many GPUs to finish in 60 days instead?
$napkin train-time --params 70B --tokens 15T --days 60 --json | python3 -c 'import json,sys; print("GPUs for 60 days:", json.load(sys.stdin)["gpus"])'

# 3. Does Llama 3 70B's training state fit on 64 GPUs with FSDP, and with what micro-batch?
$napkin memory --model llama3-70b --gpus 64 --precision mixed --sharding fsdp --flash-attention --recompute full

# 4. Is 15T tokens compute-optimal for this budget?
$napkin optimal --compute 6.3e24

# 5. The same run on the team's own profile, loaded by path.
$napkin train-time --params 70B --tokens 15T --gpus 1024 --hardware-file "$(dirname "$0")/my-h100.yaml"
