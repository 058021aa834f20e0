#!/usr/bin/env bash
# Coverage-guided fuzzing of the native reader (analyzer/_kineto.c) under AddressSanitizer and UBSan, then the
# check of everything it found against DuckDB's reader. Needs clang with libFuzzer (Debian: clang,
# libclang-rt-14-dev) and the project installed in the active venv; CI needs neither (tests/test_native_reader.py
# runs its own sanitizer build with gcc).
#
#   bash benchmarks/libfuzzer/fuzz_kineto.sh WORKDIR [SECONDS]     # default 600 s; one core, niced
#
# WORKDIR keeps the corpus between runs (WORKDIR/corpus) and any crashing input (WORKDIR/crash-*), which
# replays with: WORKDIR/fuzz_kineto WORKDIR/crash-…
set -euo pipefail
work=$(realpath -m "${1:?WORKDIR}")
seconds=${2:-600}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$work/corpus"
pylib=$(python3 -c 'import sysconfig; print(sysconfig.get_config_var("LIBDIR"))')
pyver=$(python3 -c 'import sysconfig; print(sysconfig.get_config_var("LDVERSION"))')
# every array on malloc's heap (pages.h), where AddressSanitizer sees its bounds
clang -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -DPAGES_MAPPED_FROM='((size_t)-1)' \
    $(python3-config --includes) \
    "$here/fuzz_kineto.c" -o "$work/fuzz_kineto" -L"$pylib" -lpython"$pyver" -Wl,-rpath,"$pylib"
python3 "$here/../fuzz_kineto.py" seeds "$work/seeds"
python3 "$here/hostile_seeds.py" "$work/hostile"
nice -n 10 "$work/fuzz_kineto" -max_len=8192 -max_total_time="$seconds" -dict="$here/fuzz_kineto.dict" \
    -artifact_prefix="$work/" -print_final_stats=1 "$work/corpus" "$work/seeds" "$work/hostile"
python3 "$here/../fuzz_kineto.py" diff "$work/corpus" "$work/seeds" "$work/hostile"
