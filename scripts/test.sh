#!/usr/bin/env bash
# Sets up everything the whole test suite needs on a fresh machine, then runs it.
# Extra arguments go to pytest (e.g. scripts/test.sh -k KF101).
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
# shellcheck disable=SC1091
. .venv/bin/activate
python -m pip install -q --upgrade pip
python -m pip install -q -e ".[dev,build,lsp]"

# Neovim, and Vim with ALE, drive the real-editor LSP tests (Debian's packages).
if { ! command -v nvim >/dev/null 2>&1 || ! command -v vim >/dev/null 2>&1 || [ ! -f /usr/share/vim-ale/plugin/ale.vim ]; } \
    && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq neovim vim vim-ale >/dev/null
fi

# The SARIF 2.1.0 JSON schema the SARIF output is validated against ships in an npm package.
schema=tests/.cache/sarif-schema.json
if [ ! -f "$schema" ] && command -v npm >/dev/null 2>&1; then
    tmp=$(mktemp -d)
    if (cd "$tmp" && npm pack --silent @microsoft/jest-sarif >/dev/null 2>&1 && tar xzf ./*.tgz); then
        mkdir -p tests/.cache
        cp "$tmp"/package/lib/schemas/sarif-2.1.0-rtm.5.json "$schema"
    fi
    rm -rf "$tmp"
fi

exec python -m pytest "$@"
