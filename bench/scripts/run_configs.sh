#!/usr/bin/env bash
# Seed configurations through the harness (`anvil eval`: correctness against
# cuBLAS, timing beside same-process baselines) on a GPU node: the knob-set
# checks, A/B comparisons, operand-set spreads, counter profiles and winner
# re-measurements. LIST is a configuration list (lines name|W or M|layout|shapes|params,
# W = 03_wgmma_tma, M = 02_mma_sync; AWKWARD in shapes stands for the awkward
# shapes: tails, K < 64 x splits, odd M x N, one tile) or a winners CSV as
# run_search.sh writes it (each winner on its problem, knobs read from its name).
#   bench/scripts/run_configs.sh OUT_DIR LIST        -> OUT_DIR/configs.csv (harness CSV)
# Each configuration is built once first, in parallel (the build cache serves
# the measured runs). Per configuration and for each of VARIANTS (extra knobs,
# e.g. VARIANTS="PDL=1 PDL=0"; rows named NAME_<variant>), REPEAT times in turn:
#   ROUNDS=3         `anvil eval --rounds`
#   OPERAND_SETS="1 4"  one row per value (`--operand-sets`, rows NAME_sN_pP), in
#                    PROCS separate processes each, then the ratio spread per value
#   PROFILE=1        `--profile`: GPU counters beside the fastest baseline (profile.md)
# Example: the PDL A/B of bench/configs/pdl_ab.txt:
#   VARIANTS="PDL=1 PDL=0" REPEAT=2 bench/scripts/run_configs.sh OUT bench/configs/pdl_ab.txt
. "$(dirname "$0")/node.sh"
LIST=${2:?usage: run_configs.sh OUT_DIR LIST}
AWKWARD="77x3000x1234 1x1x1 130x200x65 33x17x1000 256x64x12288 1000x1000x1000 4096x4096x128"
if [[ $LIST == *.csv ]]; then
  mapfile -t ENTRIES < <(python3 "$BENCH/scripts/winners_list.py" "$LIST" "$SEEDS")
else
  mapfile -t ENTRIES < <(grep -vE '^\s*(#|$)' "$LIST" | sed "s#AWKWARD#$AWKWARD#")
fi
VARIANTS=${VARIANTS:--}
SECONDS=0
for e in "${ENTRIES[@]}"; do
  IFS='|' read -r name fam layout shapes params <<< "$e"
  for v in $VARIANTS; do
    [ "$v" = - ] && v=
    (cd /tmp && timeout 300 "$ANVIL" eval "$(seed_file "$fam")" --layout "$layout" --rounds 1 --shape 64x64x64 \
       $(for p in $params $v; do echo --param "$p"; done) > /dev/null 2>&1) &
  done
done
wait
echo "prebuilt ${#ENTRIES[@]} configurations in ${SECONDS}s"
C=$OUT/configs.csv; python3 "$BENCH/scripts/eval_csv.py" --header > "$C"
: > "$OUT/profile.md"
for e in "${ENTRIES[@]}"; do
  IFS='|' read -r name fam layout shapes params <<< "$e"
  for _ in $(seq "${REPEAT:-1}"); do
    for v in $VARIANTS; do
      row=$name; [ "$v" = - ] && v= || row=${name}_${v//=/}
      if [ -n "${OPERAND_SETS:-}" ]; then
        for p in $(seq "${PROCS:-3}"); do
          for s in $OPERAND_SETS; do
            eval_rows "${row}_s${s}_p$p" "$(seed_file "$fam")" "$layout" "$shapes" "$params $v" \
              --operand-sets "$s" --rounds "${ROUNDS:-3}" >> "$C"
          done
        done
      elif [ "${PROFILE:-0}" = 1 ]; then
        args=(); for s in $shapes; do args+=(--shape "$s"); done
        for p in $params $v; do args+=(--param "$p"); done
        (cd /tmp && timeout "${EVAL_TIMEOUT:-300}" "$ANVIL" --json eval "$(seed_file "$fam")" --layout "$layout" \
           --rounds 2 --profile "${args[@]}" < /dev/null 2>> "$OUT/stderr.txt") > "$OUT/one.jsonl"
        cat "$OUT/one.jsonl" >> "$OUT/profile.jsonl"
        python3 "$BENCH/scripts/eval_csv.py" "$row" < "$OUT/one.jsonl" >> "$C"
        python3 "$BENCH/scripts/profile_table.py" "$row" < "$OUT/one.jsonl" >> "$OUT/profile.md"
      else
        eval_rows "$row" "$(seed_file "$fam")" "$layout" "$shapes" "$params $v" --rounds "${ROUNDS:-3}" >> "$C"
      fi
    done
  done
  echo "$name: $(grep -c "^$name" "$C") rows, $(grep "^$name" "$C" | grep -vc VERDICT_PASSED) not passed"
done
rm -f "$OUT/one.jsonl"
echo "all in ${SECONDS}s"
cut -d, -f1-5,8,10,11,13,15,17,20 "$C"
[ -n "${OPERAND_SETS:-}" ] && python3 "$BENCH/scripts/operand_spread.py" "$C"
exit 0
