#!/usr/bin/env bash
# Style and static checks: clang-format (reports files that would change)
# and clang-tidy with the curated .clang-tidy, over the given files or, with
# none, every C++ file git tracks. Needs a configured build/ (scripts/setup.sh).
set -uo pipefail
cd "$(dirname "$0")/.."
if [ $# -gt 0 ]; then files=("$@"); else mapfile -t files < <(git ls-files '*.cc' '*.h'); fi
status=0
echo "== clang-format"
for f in "${files[@]}"; do
  if ! clang-format-14 --style=file --dry-run --Werror "$f" >/dev/null 2>&1; then
    echo "would reformat: $f"
    status=1
  fi
done
echo "== clang-tidy"
for f in "${files[@]}"; do
  [[ "$f" == *.cc ]] || continue
  clang-tidy-14 --quiet -p build "$f" 2>/dev/null | grep -E "warning:|error:" && status=1
done
exit $status
