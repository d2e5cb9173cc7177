# Progress for long, silent `go build`s (sourced by build.sh; needs its `log` from common.sh).
# A cold build of the five Kubernetes commands compiles about 2700 packages in ~10 minutes with no
# output at all; these report "n of m" instead, in a few dozen lines.

# go_progress LABEL TOTAL COMMAND...: reads `go build -v` output on stdin. A line that is an
# import path is a package being compiled: counted, and reported as "n of TOTAL" when it crosses
# the next 10% or 30 s after the last report, and whenever it is one of the COMMANDs (their link
# follows, silent). Every other line (a compile error, a download) is passed through at once.
# Reads to the end, so the writer never meets a closed pipe.
go_progress() {
  local label="$1" total="$2"; shift 2
  local n=0 pct=0 next=10 t0=$SECONDS last=$SECONDS line c why
  while IFS= read -r line; do
    if [[ ! $line =~ ^[A-Za-z0-9._~/+-]+$ ]]; then
      printf '%s\n' "$line" >&2
      continue
    fi
    n=$((n + 1))
    if (( total > 0 )); then pct=$((n * 100 / total)); fi
    why=""
    for c in "$@"; do
      if [[ $line == "$c" ]]; then why=", then its link: $line"; fi
    done
    if [[ -n $why ]] || (( pct >= next || SECONDS - last >= 30 )); then
      log "$label: $n of $total packages compiled ($pct%) in $((SECONDS - t0))s${why:-, now $line}"
      last=$SECONDS
      while (( next <= pct )); do next=$((next + 10)); done
    fi
  done
  log "$label: go build -v named $n of the $total packages in $((SECONDS - t0))s (the rest were in GOCACHE or need no compiling)"
}

# go_build_progress LABEL BUILD_FLAG... -- PACKAGE...: `go build -v BUILD_FLAG... PACKAGE...`
# in the current directory, reporting progress instead of staying silent for minutes: TOTAL is
# what `go list -deps` (same -tags) lists, standard library included; a package already in
# GOCACHE is not compiled, so a warm build ends below it. Returns go build's status (pipefail),
# its errors printed above.
go_build_progress() {
  local label="$1"; shift
  local flags=() list_flags=() pkgs tmp total downloads rc=0 i
  while (( $# )) && [[ $1 != -- ]]; do flags+=("$1"); shift; done
  if (( $# == 0 )); then echo "go_build_progress: no -- before the packages" >&2; return 2; fi
  shift; pkgs=("$@")
  for i in "${!flags[@]}"; do
    [[ ${flags[$i]} == -tags ]] && list_flags=(-tags "${flags[$((i + 1))]}")
  done
  tmp="$(mktemp -d)"
  if ! go list -deps "${list_flags[@]}" "${pkgs[@]}" >"$tmp/deps" 2>"$tmp/err"; then
    cat "$tmp/err" >&2
    rm -rf "$tmp"
    echo "build.sh: $label: go list -deps ${pkgs[*]} failed" >&2
    return 1
  fi
  total=$(wc -l <"$tmp/deps")
  downloads=$(grep -c '^go: downloading' "$tmp/err" || true)
  log "$label: compiling ${pkgs[*]}: at most $total packages (go list -deps; $downloads modules downloaded)"
  go build -v "${flags[@]}" "${pkgs[@]}" 2>&1 | go_progress "$label" "$total" "${pkgs[@]}" || rc=$?
  rm -rf "$tmp"
  if (( rc != 0 )); then
    echo "build.sh: $label: go build failed (exit $rc); its errors are above" >&2
  fi
  return "$rc"
}
