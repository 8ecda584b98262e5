#!/usr/bin/env bash
# Sets up everything the whole test suite needs on a fresh machine, then runs it.
# Extra arguments go to pytest (e.g. scripts/test.sh -k KF101).
# --fast (first argument) runs the fast lane: every test not marked `slow` (TensorFlow
# builds, real editors, a browser, pre-commit's own install, long fuzz/property runs).
set -euo pipefail
cd "$(dirname "$0")/.."
lane=()
if [ "${1:-}" = --fast ]; then
    shift
    lane=(-m "not slow")
fi

PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
# shellcheck disable=SC1091
. .venv/bin/activate
# Install only when this venv was not yet installed from this very pyproject.toml (a
# stamp holds its hash): a re-run skips ~30 s of pip; a fresh machine, or a changed
# pyproject, still gets everything. KERASFIT_REINSTALL=1 forces it.
extras="dev,build,lsp"
stamp=.venv/.kerasfit-installed
want="$(sha256sum pyproject.toml | cut -d' ' -f1) [$extras]"
if [ "${KERASFIT_REINSTALL:-}" = 1 ] || [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    python -m pip install -q --upgrade pip
    python -m pip install -q -e ".[$extras]"
    echo "$want" > "$stamp"
fi

# Neovim, Vim with ALE, and Emacs with eglot drive the real-editor LSP tests (Debian's
# packages; bookworm's Emacs 28 has no built-in eglot, elpa-eglot brings it).
if { ! command -v nvim >/dev/null 2>&1 || ! command -v vim >/dev/null 2>&1 || [ ! -f /usr/share/vim-ale/plugin/ale.vim ] \
     || ! command -v emacs >/dev/null 2>&1 || ! ls -d /usr/share/emacs/site-lisp/elpa/eglot-* >/dev/null 2>&1; } \
    && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq neovim vim vim-ale emacs-nox elpa-eglot >/dev/null
fi

# Headless Chromium renders the `report --html` page in its test (Debian's package).
if ! command -v chromium >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi

# strace delivers a real signal at an exact system call (a write in the middle of --fix)
# in tests/test_writeback.py (Debian's package).
if ! command -v strace >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq strace >/dev/null
fi

# Tests run in parallel (pytest-xdist), one worker per core.
exec python -m pytest -n auto "${lane[@]}" "$@"
