#!/usr/bin/env bash
# Held-out wording, k = 8: the ranked cascade's settings on many domain seeds (see README.md).
# usage: bash docs/results/retrieval_2026-12-07/sweep.sh SPLIT "DOMAINS" "SUBGOALS" "WEIGHTS"
set -euo pipefail
split=$1; domains=$2; subgoals=$3; weights=$4
out=docs/results/retrieval_2026-12-07/runs
mkdir -p "$out"
for d in $domains; do for sg in $subgoals; do for w in $weights; do
  f="$out/${split}_domain${d}_${sg}_w${w}.json"
  [ -s "$f" ] && continue
  python -m launch.bench.retrieval --domain=synthetic_math --split="$split" --k=8 --queries=128 --heldout=wording \
    --ranker=expanded_hybrid --ablation --encoder_seed=0 --encoder_members=5 --subgoals="$sg" --seed="$d" \
    --encoder_weight="$w" --json_out="$f" > /dev/null
done; done; done
