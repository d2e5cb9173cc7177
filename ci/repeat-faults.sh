#!/usr/bin/env bash
# Runs every fault and kill trial of tests/traps.rs N times (default 10) on the hermetic cluster
# that is already running, and says how often each one passed.
#
#   bash ci/repeat-faults.sh [N]
#
# Refuses, saying why, unless ci/hermetic/kubeconfig.sh gives a cluster that answers. Then, with
# fresh lab directories (evidence and working copy in a new /tmp/cnpe-repeat.* directory, the
# bare repository in a new directory where the cluster's git daemon serves from):
#   1. `cnpe-lab reset --yes` (the lab's Application, AppProject and namespace on that cluster go:
#      the run takes the cluster over, as the faults do anyway), then the lab once
#      (`cargo test --locked --test lab`), which must pass;
#   2. N rounds of `cargo test --locked --test traps -- fault_` (the hermetic faults, the SIGKILL
#      and resume trials, the full and read-only evidence filesystems), each round's log kept;
#   3. after every round, from the faults*.json each round writes (tests/traps.rs, FaultRecord),
#      faults-repeat.json in the evidence directory (per trial: passed/runs, seconds, every
#      failure with its round and detail) and a table on stderr.
# A round takes about 5.5 minutes on 2 cores (measured 2026-12-05: 4 faults, 14 kill trials 3 at a
# time, 2 filesystem trials). Exit 0 only if every trial passed in every round.
# Nothing is started in the background; the directories are kept (they are the result).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
# shellcheck source=hermetic/common.sh
. ci/hermetic/common.sh                      # RUN, BIN (kubectl), KUBECONFIG_ADMIN, log
export PATH="$PATH:/root/.cargo/bin"

ROUNDS="${1:-10}"
if [[ ! $ROUNDS =~ ^[1-9][0-9]*$ ]]; then
  echo "usage: bash ci/repeat-faults.sh [N]   (N: rounds, a positive integer; default 10)" >&2
  exit 2
fi
refuse() { printf 'repeat-faults: %s\n' "$*" >&2; exit 1; }
say() { printf '\n== repeat-faults [%ds] %s\n' "$SECONDS" "$*" >&2; }
START="bash ci/hermetic/build.sh && bash ci/hermetic/up.sh"

# ---- the running hermetic cluster, or a clear refusal
if ! KUBECONFIG="$(bash ci/hermetic/kubeconfig.sh 2>/dev/null)"; then
  refuse "no hermetic cluster is running (ci/hermetic/kubeconfig.sh: $KUBECONFIG_ADMIN missing); start one first: $START"
fi
KCTL="$BIN/kubectl"
[[ -x $KCTL ]] || KCTL="$(command -v kubectl || true)"
[[ -n $KCTL ]] || refuse "no kubectl ($BIN/kubectl is not built): $START"
if ! answer="$("$KCTL" --kubeconfig "$KUBECONFIG" --request-timeout=10s get --raw=/readyz 2>&1)"; then
  refuse "the hermetic cluster of $KUBECONFIG does not answer (kubectl get --raw=/readyz: ${answer//$'\n'/ }); restart it: bash ci/hermetic/down.sh && bash ci/hermetic/up.sh"
fi
# Argo CD reads the lab's bare repository through the git daemon up.sh started: the repository
# must be under the directory it serves (its --base-path, recorded in $RUN/argv/git-daemon).
base=""
if [[ -r $RUN/argv/git-daemon ]]; then
  mapfile -d '' daemon_argv <"$RUN/argv/git-daemon"
  for a in "${daemon_argv[@]}"; do
    if [[ $a == --base-path=* ]]; then base="${a#--base-path=}"; fi
  done
fi
if [[ -z $base || ! -d $base ]]; then
  refuse "cannot tell where the cluster's git daemon serves from ($RUN/argv/git-daemon has no --base-path to an existing directory); restart it: bash ci/hermetic/down.sh && bash ci/hermetic/up.sh"
fi

# ---- fresh lab directories
WORK="$(mktemp -d /tmp/cnpe-repeat.XXXXXX)"
BARE_DIR="$(mktemp -d "$base/cnpe-repeat.XXXXXX")"
export KUBECONFIG CNPE_LAB_REQUIRED=1 CNPE_CLUSTER=current CI=true CARGO_TERM_COLOR=never
export CNPE_EVIDENCE_DIR="$WORK/cnpe" CNPE_GITOPS_DIR="$WORK/gitops" CNPE_BARE_REPO="$BARE_DIR/app.git"
export CNPE_REPO_URL="git://gitd.gitsrv.svc.cluster.local:9418/${BARE_DIR##*/}/app.git"
SUMMARY="$CNPE_EVIDENCE_DIR/faults-repeat.json"
RUNS="$WORK/rounds.tsv"                      # round, traps exit status, outcome file, log
: >"$RUNS"
say "$ROUNDS rounds on $KUBECONFIG; evidence and logs in $WORK, bare repository $CNPE_BARE_REPO"

say "building the lab and the traps"
cargo build --locked --bin cnpe-lab
cargo test --locked --test lab --test traps --no-run

say "reset of the lab's objects on the cluster, then the lab once"
cargo run --locked --quiet --bin cnpe-lab -- reset --yes
if ! cargo test --locked --test lab >"$WORK/lab.log" 2>&1; then
  tail -n 40 "$WORK/lab.log" >&2
  refuse "the lab failed (log: $WORK/lab.log): the faults run after a lab that passed"
fi
log "the lab passed (log: $WORK/lab.log)"

# The name the traps binary gives its next outcome file (records::write_json_numbered).
next_outcome_file() {
  local n=1 f="$CNPE_EVIDENCE_DIR/faults.json"
  while [[ -e $f ]]; do n=$((n + 1)); f="$CNPE_EVIDENCE_DIR/faults-$n.json"; done
  printf '%s\n' "$f"
}

# summarize ROUNDS RUNS_TSV SUMMARY_JSON: folds every round's outcome file into the summary and
# prints the table; exit 0 only if every trial passed in every round so far.
summarize() {
  python3 - "$@" <<'PY'
import json, sys, datetime
rounds, runs_tsv, out = int(sys.argv[1]), sys.argv[2], sys.argv[3]
trials, runs, missing = {}, [], []
for line in open(runs_tsv):
    rnd, rc, path, log = line.rstrip("\n").split("\t")
    rnd, rc = int(rnd), int(rc)
    try:
        outcomes = json.load(open(path))
    except (OSError, ValueError) as e:
        outcomes = None
        missing.append({"round": rnd, "exit": rc, "log": log, "why": f"no outcome file {path}: {e}"})
    runs.append({"round": rnd, "exit": rc, "outcomes": path if outcomes is not None else None, "log": log})
    for r in outcomes or []:
        t = trials.setdefault(r["fault"], {"passed": 0, "runs": 0, "seconds": [], "failures": []})
        t["runs"] += 1
        t["seconds"].append(r["seconds"])
        if r["passed"]:
            t["passed"] += 1
        else:
            t["failures"].append({"round": rnd, "detail": r["detail"], "seconds": r["seconds"], "log": log})
for t in trials.values():
    s = t.pop("seconds")
    t["seconds_mean"] = round(sum(s) / len(s), 1)
    t["seconds_max"] = round(max(s), 1)
summary = {
    "written_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    "rounds_asked": rounds,
    "rounds_done": len(runs),
    "trials": dict(sorted(trials.items())),
    "rounds": runs,
    "rounds_without_outcomes": missing,
}
with open(out + ".tmp", "w") as f:
    json.dump(summary, f, indent=2)
    f.write("\n")
import os
os.replace(out + ".tmp", out)

w = max([len(n) for n in trials] + [5])
err = sys.stderr
print(f"\n{'trial':<{w}}  passed/runs  mean s   max s  first failure", file=err)
for name, t in summary["trials"].items():
    first = t["failures"][0] if t["failures"] else None
    why = f"round {first['round']}: {first['detail'].splitlines()[0][:100] if first['detail'] else ''}" if first else ""
    print(f"{name:<{w}}  {t['passed']:>6}/{t['runs']:<4}  {t['seconds_mean']:>6}  {t['seconds_max']:>6}  {why}", file=err)
for m in missing:
    print(f"round {m['round']}: traps exited {m['exit']} without outcomes ({m['why']}; log {m['log']})", file=err)
ok = sum(t["passed"] for t in trials.values())
total = sum(t["runs"] for t in trials.values())
print(f"{len(runs)} of {rounds} rounds done: {ok} of {total} trial runs passed; summary in {out}", file=err)
sys.exit(0 if ok == total and not missing and total > 0 else 1)
PY
}

status=0
for ((round = 1; round <= ROUNDS; round++)); do
  say "round $round of $ROUNDS: cargo test --locked --test traps -- fault_"
  outcome="$(next_outcome_file)"
  rc=0
  cargo test --locked --test traps -- fault_ >"$WORK/traps-$round.log" 2>&1 || rc=$?
  printf '%s\t%s\t%s\t%s\n' "$round" "$rc" "$outcome" "$WORK/traps-$round.log" >>"$RUNS"
  status=0
  summarize "$ROUNDS" "$RUNS" "$SUMMARY" || status=$?
done
say "done: $SUMMARY (rounds' logs and outcome files in $WORK)"
exit "$status"
