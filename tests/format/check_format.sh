#!/usr/bin/env bash
# Every C++ file as .clang-format lays it out (100 columns): the ctest entry `format` in the
# plain tree. To fix: git ls-files '*.cpp' '*.hpp' | xargs clang-format -i
set -euo pipefail
cd "$1"
files=$(git ls-files '*.cpp' '*.hpp' ':!tests/js')
# shellcheck disable=SC2086 # one word a file (no file name holds a space)
if ! clang-format --dry-run --Werror $files 2>/tmp/kpool-format.$$; then
    grep -E "^[^ ].*: (error|warning):" /tmp/kpool-format.$$ | cut -d: -f1 | sort -u |
        sed 's/^/not formatted: /'
    rm -f /tmp/kpool-format.$$
    echo "fix with: git ls-files '*.cpp' '*.hpp' | xargs clang-format -i" >&2
    exit 1
fi
rm -f /tmp/kpool-format.$$
echo "$(echo "$files" | wc -w) files formatted as .clang-format says"
