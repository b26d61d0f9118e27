# shellcheck shell=bash disable=SC2034  # the variables set here are used by the sourcing script
# Sourced by the scripts in this folder; not meant to be run.
#
# Sets REPO_ROOT and cds into it, puts Swift on PATH, and builds the flags every `swift build`
# and `swift test` call shares, so that the scripts and `--show-bin-path` agree on where
# things are built:
#   SWIFT_SCRATCH_PATH  build directory (default .build, relative to the repo root)
#   SWIFT_BUILD_FLAGS   extra flags for swift build/test, split on spaces
#   SWIFT_ROOT          the toolchain (default /opt/swift)

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO_ROOT" || exit

SWIFT_ROOT=${SWIFT_ROOT:-/opt/swift}
CALLER_PATH=$PATH
if [[ -x "$SWIFT_ROOT/usr/bin/swift" && ":$PATH:" != *":$SWIFT_ROOT/usr/bin:"* ]]; then
    export PATH="$SWIFT_ROOT/usr/bin:$PATH"
fi

SWIFT_SCRATCH_PATH=${SWIFT_SCRATCH_PATH:-.build}
read -r -a swift_extra_flags <<<"${SWIFT_BUILD_FLAGS:-}"
swift_flags=(--scratch-path "$SWIFT_SCRATCH_PATH" "${swift_extra_flags[@]}")

# Progress goes to stderr so that a script's stdout stays machine-readable.
say() { printf '==> %s\n' "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# bench_headline NAME: where a benchmark leaves its rows of README's headline table
# (BENCH_HEADLINE=.bench/headline/NAME.json, which scripts/bench-headline reads), with the commit
# measured (BENCH_COMMIT; "+changes" when Sources differ from it). A --smoke run calls it not.
bench_headline() {
    mkdir -p "$REPO_ROOT/.bench/headline"
    export BENCH_HEADLINE="$REPO_ROOT/.bench/headline/$1.json"
    BENCH_COMMIT=$(git -C "$REPO_ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)
    if [[ -n $(git -C "$REPO_ROOT" status --porcelain -- Sources Package.swift 2>/dev/null) ]]; then
        BENCH_COMMIT+="+changes"
    fi
    export BENCH_COMMIT
}
