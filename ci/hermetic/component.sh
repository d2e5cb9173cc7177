#!/usr/bin/env bash
# Stops or starts ONE component of the running hermetic cluster, for fault tests: a real stop
# (SIGTERM, then SIGKILL after 20 s) and a real start with the exact command line up.sh used
# ($RUN/argv/NAME), its log appended, its new pid replacing the old one in $RUN/pids (so down.sh
# still stops it). Acts only on components up.sh started.
# Usage: component.sh stop|start NAME      Exit: 0 done; 1 failed; 2 usage or unknown component.
set -euo pipefail
. "$(dirname "$0")/common.sh"
action="${1:-}" name="${2:-}"
argv="$RUN/argv/$name"
usage() { echo "usage: component.sh stop|start NAME (a component up.sh started: see $PIDFILE)" >&2; exit 2; }
if [[ $action != stop && $action != start ]] || [[ -z $name ]]; then usage; fi
[[ -s $PIDFILE && -s $argv ]] || { echo "component.sh: '$name' was not started by up.sh (no $argv)" >&2; exit 2; }
running() { kill -0 "$1" 2>/dev/null && [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" != Z ]; }
pid="$(awk -v n="$name" '$1==n{p=$2} END{print p}' "$PIDFILE")"
case $action in
  stop)
    if [[ -z $pid ]] || ! running "$pid"; then log "$name is not running"; exit 0; fi
    kill -TERM "$pid"
    kill -CONT "$pid" 2>/dev/null || true   # a SIGSTOPped one takes the TERM only once continued
    deadline=$((SECONDS + 20))
    while running "$pid"; do
      if ((SECONDS > deadline)); then kill -KILL "$pid" 2>/dev/null || true; log "killed $name ($pid)"; fi
      sleep 0.1
    done
    log "stopped $name ($pid)"
    ;;
  start)
    if [[ -n $pid ]] && running "$pid"; then echo "component.sh: $name is already running (pid $pid)" >&2; exit 1; fi
    mapfile -d '' -t cmd < "$argv"
    setsid "${cmd[@]}" >>"$LOGS/$name.log" 2>&1 < /dev/null &
    new=$!
    tmp="$(mktemp "$PIDFILE.XXXXXX")"
    awk -v n="$name" -v p="$new" '$1==n{$2=p; found=1} {print} END{if(!found) print n, p}' "$PIDFILE" > "$tmp"
    mv "$tmp" "$PIDFILE"
    log "started $name (pid $new)"
    ;;
esac
