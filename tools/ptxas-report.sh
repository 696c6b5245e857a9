#!/usr/bin/env bash
# The CUDA compiler launcher of ms_backend_cuda (CMakeLists.txt): runs the nvcc command it is given, which passes
# -Xptxas -v, and moves ptxas's per-kernel resource report (registers, shared memory, stack frame, spills) out of
# the build's output into OBJECT.ptxas.txt beside the object; every other line of the compiler's stderr passes through.
set -uo pipefail
object="" previous=""
for arg in "$@"; do
  [ "$previous" = "-o" ] && object=$arg
  previous=$arg
done
log=$(mktemp)
"$@" 2>"$log"
rc=$?
report='^ptxas info|^ +[0-9]+ bytes stack frame'
[ -n "$object" ] && { grep -E "$report" "$log" >"$object.ptxas.txt" || true; }
grep -v -E "$report" "$log" >&2
rm -f "$log"
exit $rc
