#!/usr/bin/env bash
# The GitHub Action's step (action.yml): checks its inputs, runs `cnpe-lab gate` once, and hands
# the verdict to the workflow. Runs the same outside GitHub (ci/action/test.sh runs it against
# kind): without GITHUB_OUTPUT / GITHUB_STEP_SUMMARY it only prints.
#
# Env (action.yml maps the inputs): CNPE_LAB (the binary), CNPE_GATE_APP, CNPE_GATE_SHA, exactly
# one of CNPE_GATE_EXPECT_BODY / _CONTAINS / _JSON, CNPE_GATE_PATH (/), CNPE_GATE_TIMEOUT (120),
# CNPE_GATE_RESULTS (where the verdict JSON, metrics and log go; created), KUBECONFIG.
# Exit: 0 approved, 1 rejected, 2 bad input or the gate could not decide (outputs: verdict=error).
set -euo pipefail

out() { # NAME VALUE: a step output when run by Actions
  if [[ -n ${GITHUB_OUTPUT:-} ]]; then printf '%s=%s\n' "$1" "$2" >>"$GITHUB_OUTPUT"; fi
}
refuse() {
  echo "cnpe-gate action: $*" >&2
  out verdict error
  exit 2
}

app="${CNPE_GATE_APP:-}"
sha="${CNPE_GATE_SHA:-}"
timeout="${CNPE_GATE_TIMEOUT:-120}"
path="${CNPE_GATE_PATH:-/}"
results="${CNPE_GATE_RESULTS:-}"
lab="${CNPE_LAB:-cnpe-lab}"

[[ -n $app ]] || refuse "input 'app' is empty: name the Argo CD Application to gate"
[[ $app =~ ^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$ ]] || refuse "input 'app' ($app) is not an Application name"
[[ $sha =~ ^[0-9a-f]{40}$ ]] || refuse "input 'sha' ($sha) is not a full 40-hex commit SHA (a branch or short SHA would gate whatever it points to later)"
[[ $timeout =~ ^[1-9][0-9]*$ ]] || refuse "input 'timeout' ($timeout) is not a positive number of seconds"
[[ $path == /* ]] || refuse "input 'path' ($path) must start with /"
[[ -n $results ]] || refuse "CNPE_GATE_RESULTS is empty: where should the verdict go?"
expect=()
given=()
if [[ -n ${CNPE_GATE_EXPECT_BODY:-} ]]; then expect=(--expect-body "$CNPE_GATE_EXPECT_BODY"); given+=(expect-body); fi
if [[ -n ${CNPE_GATE_EXPECT_CONTAINS:-} ]]; then expect=(--expect-contains "$CNPE_GATE_EXPECT_CONTAINS"); given+=(expect-contains); fi
if [[ -n ${CNPE_GATE_EXPECT_JSON:-} ]]; then expect=(--expect-json "$CNPE_GATE_EXPECT_JSON"); given+=(expect-json); fi
[[ ${#given[@]} -eq 1 ]] \
  || refuse "give exactly one of the inputs expect-body, expect-contains, expect-json (given: ${given[*]:-none})"
command -v "$lab" >/dev/null || refuse "cnpe-lab binary $lab not found (input 'cnpe-lab', or let the action build it)"

mkdir -p "$results"
# One verdict per gate run: the gate refuses to overwrite a verdict, so the name is this run's.
tag="${app}-${sha:0:12}-${GITHUB_RUN_ID:-local}-${GITHUB_RUN_ATTEMPT:-$$}-${GITHUB_ACTION:-gate}"
verdict_json="$results/verdict-$tag.json"
metrics="$results/metrics-$tag.prom"
log="$results/gate-$tag.log"
out results "$results"
out verdict-json "$verdict_json"
out metrics "$metrics"

status=0
"$lab" gate --app "$app" --sha "$sha" "${expect[@]}" --path "$path" --timeout "$timeout" \
  --json "$verdict_json" --metrics "$metrics" >"$log" 2>&1 || status=$?
cat "$log"
case $status in
  0) verdict=approved ;;
  1) verdict=rejected ;;
  *) verdict=error ;;
esac
out verdict "$verdict"
if [[ -n ${GITHUB_STEP_SUMMARY:-} ]]; then
  {
    echo "### cnpe-lab gate: $app at ${sha:0:12}: $verdict"
    echo
    echo '```'
    head -n 40 "$log"
    echo '```'
  } >>"$GITHUB_STEP_SUMMARY"
fi
echo "cnpe-gate action: $app at ${sha:0:12}: $verdict (exit $status); verdict $verdict_json, metrics $metrics" >&2
exit "$status"
