#!/usr/bin/env bash
# Runs every libFuzzer target of a fuzz build (`make fuzz`) for a bounded time
# over its committed corpus. New inputs go to <build>/fuzz/corpus/<name>/ (the
# repository's corpus is only read); crashes to <build>/fuzz/artifacts/.
#   fuzz/run.sh <build dir> <seconds per target> [target...]
set -uo pipefail
build=${1:?usage: fuzz/run.sh <build dir> <seconds per target> [target...]}
seconds=${2:?seconds per target}
shift 2
src=$(cd "$(dirname "$0")" && pwd)
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then mapfile -t targets < "$build/fuzz/targets.txt"; fi

failed=()
for t in "${targets[@]}"; do
  [ -n "$t" ] || continue
  work="$build/fuzz/corpus/$t"
  mkdir -p "$work" "$build/fuzz/artifacts"
  args=(-max_total_time="$seconds" -max_len=4096 -timeout=10 -rss_limit_mb=2048 -print_final_stats=1
        -artifact_prefix="$build/fuzz/artifacts/$t-")
  [ -f "$src/$t.dict" ] && args+=(-dict="$src/$t.dict")
  echo "== fuzz $t for ${seconds}s"
  log="$build/fuzz/$t.log"
  if "$build/fuzz/fuzz_$t" "${args[@]}" "$work" "$src/corpus/$t" > "$log" 2>&1; then
    grep -E "^stat::(number_of_executed_units|average_exec_per_sec|new_units_added)|^#[0-9]+.*DONE" "$log" | sed 's/^/   /'
  else
    echo "   FINDING: see $log and $build/fuzz/artifacts/$t-*"
    grep -E "FUZZ FINDING|ERROR: |runtime error|terminate called|what\(\)" "$log" | head -5 | sed 's/^/   /'
    failed+=("$t")
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: findings in ${failed[*]}"
  exit 1
fi
echo "fuzz: no findings (${#targets[@]} targets, ${seconds}s each)"
