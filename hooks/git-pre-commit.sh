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

# Checks the staged memory files with `qmem-git validate --staged`. qmem-git is found as your
# shell finds it (PATH), else through the Python that installed this hook ($1). When neither
# is there the commit goes ahead with a warning (`qmem-git validate` checks it later), unless
# QMEM_HOOK_REQUIRED=1, which refuses the commit instead.
qmem_git_validate() {
    top=$(git rev-parse --show-toplevel) || exit 1
    if command -v qmem-git >/dev/null 2>&1; then
        qmem-git --memory-dir "$top" validate --staged
        status=$?  # 126/127: a launcher whose install is gone; try the fallback
        if [ "$status" -ne 126 ] && [ "$status" -ne 127 ]; then
            exit "$status"
        fi
    fi
    if [ -x "$1" ] && "$1" -c "import qmem_git" >/dev/null 2>&1; then
        exec "$1" -m qmem_git --memory-dir "$top" validate --staged
    fi
    if [ "${QMEM_HOOK_REQUIRED:-0}" = 1 ]; then
        echo "qmem-git pre-commit: cannot run qmem-git (not on PATH, or its install is gone); commit refused (QMEM_HOOK_REQUIRED=1) (hint: install it, e.g. 'pipx install qmem-git', or commit with --no-verify)" >&2
        exit 1
    fi
    echo "qmem-git pre-commit: warning: cannot run qmem-git (not on PATH, or its install is gone); commit not validated (hint: install it, e.g. 'pipx install qmem-git', then run 'qmem-git validate'; QMEM_HOOK_REQUIRED=1 refuses such commits)" >&2
    exit 0
}
qmem_git_validate
