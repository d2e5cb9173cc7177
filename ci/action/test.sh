#!/usr/bin/env bash
# The GitHub Action's script (ci/action/gate.sh), run here as Actions runs it, against the
# cluster the lab just ran on (its Application serving the recovered release): .ci/run's kind
# tier runs it before the hook checks. GITHUB_OUTPUT and GITHUB_STEP_SUMMARY are files this
# script makes; every case checks the exit status, the outputs and the files.
#   1. the serving SHA and body: approved, the verdict JSON says so, the metrics hold the gauges;
#   2. the same SHA with another expected body: rejected within the timeout, its reason named;
#   3. bad inputs (a branch for sha, two expect-* inputs, no app): exit 2 naming the input;
#   4. an Application that does not exist: exit 2, verdict=error.
# Needs KUBECONFIG and CNPE_LAB (default: target/debug/cnpe-lab).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
: "${KUBECONFIG:?KUBECONFIG must point at the cluster the lab ran on}"
export CNPE_LAB="${CNPE_LAB:-$ROOT/target/debug/cnpe-lab}"
[[ -x $CNPE_LAB ]] || { echo "action-test: $CNPE_LAB is not built (cargo build)" >&2; exit 1; }
ARGO_NS="${CNPE_ARGOCD_NAMESPACE:-argocd}" APP="${CNPE_APPLICATION:-cnpe-shop}" BODY="${CNPE_BODY:-labhub-cnpe-v1}"
T0=$SECONDS
say() { printf '\n== action-test [%ds] %s\n' "$((SECONDS - T0))" "$*" >&2; }
fail() { echo "action-test: FAILED: $*" >&2; exit 1; }
WORK="$(mktemp -d /tmp/cnpe-action.XXXXXX)"
echo "action-test: outputs, summaries and verdicts under $WORK (kept)" >&2

# run CASE [VAR=VALUE...]: gate.sh with a fresh GITHUB_OUTPUT/GITHUB_STEP_SUMMARY; sets STATUS,
# OUTPUT (the step outputs) and ERR (what it printed).
run() {
  local case=$1
  shift
  mkdir -p "$WORK/$case"
  : >"$WORK/$case/output"
  : >"$WORK/$case/summary"
  STATUS=0
  ERR="$(env GITHUB_OUTPUT="$WORK/$case/output" GITHUB_STEP_SUMMARY="$WORK/$case/summary" \
    GITHUB_RUN_ID=local GITHUB_RUN_ATTEMPT=1 GITHUB_ACTION="$case" CNPE_GATE_RESULTS="$WORK/$case/results" \
    CNPE_GATE_APP= CNPE_GATE_SHA= CNPE_GATE_EXPECT_BODY= CNPE_GATE_EXPECT_CONTAINS= CNPE_GATE_EXPECT_JSON= \
    "$@" bash ci/action/gate.sh 2>&1)" || STATUS=$?
  OUTPUT="$(cat "$WORK/$case/output")"
  echo "$case: exit $STATUS; outputs: $(tr '\n' ' ' <<<"$OUTPUT")" >&2
}
output() { sed -n "s/^$1=//p" <<<"$OUTPUT"; }

SHA="$(kubectl -n "$ARGO_NS" get application "$APP" -o jsonpath='{.spec.source.targetRevision}')"
[[ $SHA =~ ^[0-9a-f]{40}$ ]] || fail "Application $APP's targetRevision ($SHA) is not a full SHA: has the lab run?"

say "1. the serving SHA and body: approved"
run approved CNPE_GATE_APP="$APP" CNPE_GATE_SHA="$SHA" CNPE_GATE_EXPECT_BODY="$BODY" CNPE_GATE_TIMEOUT=120
[[ $STATUS -eq 0 && $(output verdict) == approved ]] || fail "the serving release was not approved: $ERR"
json="$(output verdict-json)" metrics="$(output metrics)"
python3 -c 'import json,sys; v=json.load(open(sys.argv[1])); assert v["approved"] is True, v["approved"]' "$json" \
  || fail "the verdict JSON $json does not say approved"
grep -E '^cnpe_gate_approved\{.*\} 1$' "$metrics" >/dev/null || fail "no cnpe_gate_approved 1 in $metrics"
grep -E '^cnpe_gate_lie_synced_not_serving_seconds\{' "$metrics" >/dev/null || fail "no lie-window gauge in $metrics"
grep -F "$APP at ${SHA:0:12}: approved" "$WORK/approved/summary" >/dev/null || fail "the step summary does not give the verdict"

say "2. another expected body: rejected, the reason named"
run rejected CNPE_GATE_APP="$APP" CNPE_GATE_SHA="$SHA" CNPE_GATE_EXPECT_BODY="$BODY-not-this" CNPE_GATE_TIMEOUT=10
[[ $STATUS -eq 1 && $(output verdict) == rejected ]] || fail "another body was not rejected (exit $STATUS): $ERR"
[[ $ERR == *endpoint_answers* ]] || fail "the rejection does not name endpoint_answers: $ERR"
python3 -c 'import json,sys; v=json.load(open(sys.argv[1])); assert v["approved"] is False, v["approved"]' "$(output verdict-json)" \
  || fail "the verdict JSON does not say approved: false"

say "3. bad inputs: exit 2 naming the input, nothing decided"
run branch CNPE_GATE_APP="$APP" CNPE_GATE_SHA=main CNPE_GATE_EXPECT_BODY="$BODY"
[[ $STATUS -eq 2 && $(output verdict) == error && $ERR == *"input 'sha'"* ]] || fail "sha=main: $ERR"
run two-expects CNPE_GATE_APP="$APP" CNPE_GATE_SHA="$SHA" CNPE_GATE_EXPECT_BODY="$BODY" CNPE_GATE_EXPECT_CONTAINS=labhub
[[ $STATUS -eq 2 && $ERR == *"exactly one of the inputs expect-body, expect-contains, expect-json (given: expect-body expect-contains)"* ]] \
  || fail "two expect inputs: $ERR"
run no-app CNPE_GATE_SHA="$SHA" CNPE_GATE_EXPECT_BODY="$BODY"
[[ $STATUS -eq 2 && $ERR == *"input 'app' is empty"* ]] || fail "no app: $ERR"
for c in branch two-expects no-app; do
  [[ ! -e $WORK/$c/results ]] || fail "$c wrote results although its input was refused"
done

say "4. an Application that does not exist: exit 2, verdict=error"
run missing CNPE_GATE_APP=cnpe-no-such-app CNPE_GATE_SHA="$SHA" CNPE_GATE_EXPECT_BODY="$BODY"
[[ $STATUS -eq 2 && $(output verdict) == error && $ERR == *"does not exist"* ]] || fail "a missing Application: $ERR"
say "all action checks passed"
