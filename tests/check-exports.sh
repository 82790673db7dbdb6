#!/bin/sh
# check-exports.sh LIB: the shared library exports only the public pyu_ API
# (no internal helper leaks into programs that link it).
lib=$1
bad=$(nm -D --defined-only "$lib" | awk '{print $3}' | grep -v '^pyu_' | grep -v '^PYUNWIND_0$' || true)
if [ -n "$bad" ]; then
    echo "unexpected exported symbols in $lib:"
    echo "$bad"
    exit 1
fi
n=$(nm -D --defined-only "$lib" | grep -c ' pyu_')
[ "$n" -ge 10 ] || { echo "only $n pyu_ symbols exported from $lib"; exit 1; }
echo "exports of $lib: $n pyu_ symbols, nothing else"
