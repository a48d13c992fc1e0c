#!/bin/sh
# qmem-git pre-commit hook for the memory repository (qmem-git-managed-hook).
# Installed by `qmem-git init`, which rewrites this file; edit pre-commit.local instead.
# A hook that was here before qmem-git was kept as pre-commit.local* and runs first.
# qmem-git's own commits never run hooks; this guards commits made with plain git.
hook_dir=$(dirname "$0")
for previous in "$hook_dir"/pre-commit.local*; do
    if [ -f "$previous" ] && [ -x "$previous" ]; then
        "$previous" "$@" || exit $?
    fi
done
qmem-git --memory-dir "$(git rev-parse --show-toplevel)" validate --staged
