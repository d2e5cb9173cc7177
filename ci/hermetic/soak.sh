#!/usr/bin/env bash
# Soak test of the hermetic cluster: N cycles of down.sh, up.sh, smoke.sh, back to back.
# Reports how many cycles passed and how long each up.sh took (min/median/max of the passing
# ones); exits 1 if any cycle failed, 2 on a usage error. The cluster is left up after the last
# cycle when that cycle's up.sh succeeded.
# Usage: soak.sh N        Env: as up.sh (CNPE_BARE_REPO etc.); CNPE_SOAK_DIR (default: a new
# /tmp/cnpe-soak.XXXXXX) receives per-cycle logs, and a failed cycle's component logs.
set -euo pipefail
. "$(dirname "$0")/common.sh"
if [ $# -ne 1 ] || ! [[ $1 =~ ^[1-9][0-9]*$ ]]; then
  echo "usage: soak.sh N   (N >= 1 cycles of down.sh, up.sh, smoke.sh)" >&2
  exit 2
fi
N="$1"
OUT="${CNPE_SOAK_DIR:-$(mktemp -d /tmp/cnpe-soak.XXXXXX)}"
mkdir -p "$OUT"

now() { printf '%s' "$EPOCHREALTIME"; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }

passed=0
ups=()       # up.sh seconds of every cycle whose up.sh succeeded
lines=()     # one summary line per cycle
for ((i = 1; i <= N; i++)); do
  c="$(printf '%s/cycle-%03d' "$OUT" "$i")"
  mkdir -p "$c"
  result=ok up_s=- smoke_s=-
  if ! bash "$HERMETIC_DIR/down.sh" > "$c/down.log" 2>&1; then
    result="FAIL(down.sh)"
  else
    t0="$(now)"
    if bash "$HERMETIC_DIR/up.sh" > "$c/up.log" 2>&1; then
      up_s="$(secs "$t0" "$(now)")"
      ups+=("$up_s")
      t0="$(now)"
      if bash "$HERMETIC_DIR/smoke.sh" > "$c/smoke.log" 2>&1; then
        smoke_s="$(secs "$t0" "$(now)")"
      else
        smoke_s="$(secs "$t0" "$(now)")"
        result="FAIL(smoke.sh)"
      fi
    else
      up_s="$(secs "$t0" "$(now)")"
      result="FAIL(up.sh)"
    fi
  fi
  if [ "$result" = ok ]; then
    passed=$((passed + 1))
  elif [ -d "$LOGS" ]; then
    cp -r "$LOGS" "$c/component-logs"   # the failing run's daemon logs, before the next down/up
  fi
  lines+=("$(printf 'cycle %3d: %-15s up %6ss  smoke %6ss' "$i" "$result" "$up_s" "$smoke_s")")
  printf '[%s] %s\n' "$(date -u +%H:%M:%S)" "${lines[-1]}" >&2
done

echo "soak: $passed of $N cycles passed (logs in $OUT)"
printf '%s\n' "${lines[@]}"
if [ ${#ups[@]} -gt 0 ]; then
  printf '%s\n' "${ups[@]}" | sort -n | awk '
    { v[NR] = $1 }
    END {
      med = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
      printf "up.sh seconds over %d successful ups: min %.1f  median %.1f  max %.1f\n", NR, v[1], med, v[NR]
    }'
fi
[ "$passed" -eq "$N" ]
