#!/usr/bin/env bash
# Cargo's target runner for scripts/cargo-mutants.sh: runs a test binary and stops it at its
# first failing test (stable libtest runs every test of a binary even after one failed, and a
# mutant needs only one). Exits 101 as a failed test binary does.
set -uo pipefail
fifo="$(mktemp -u)"
mkfifo "$fifo"
"$@" > "$fifo" 2>&1 &
pid=$!
failed=0
while IFS= read -r line; do
  printf '%s\n' "$line"
  if [[ $line == *" ... FAILED" ]]; then
    failed=1
    kill "$pid" 2>/dev/null
    break
  fi
done < "$fifo"
rm -f "$fifo"
wait "$pid"
status=$?
(( failed )) && exit 101
exit "$status"
