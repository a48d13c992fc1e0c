"""A stand-in for a headless agent (``qwen -p``): runs its hooks, writes memory, exits.

Run as ``python standin_agent.py SCRIPT_JSON``. The script is a list of actions:
``{"hook": EVENT, "payload": {...}}`` runs ``HOOK_COMMAND EVENT`` as the agents do (the payload
on stdin, stdout and stderr read through pipes, so a worker that kept one of them open would
hold the agent up) and records its exit status, stdout and wall time; ``{"write": PATH,
"pieces": [...], "pause": S}`` writes a memory file as Qwen Code does (truncate, then write),
here in pieces with pauses so a half-written file is on disk for a while; ``{"run": ARGV}``
runs a command to its end (the user at another terminal); ``{"sleep": S}``.
The results go to ``RESULTS`` as JSON when the script is done; then the process exits, with no
SessionEnd, as ``qwen -p`` does.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time


def run_hook(
    command: list[str], event: str, payload: dict[str, object], cwd: str
) -> dict[str, object]:
    started = time.monotonic()
    done = subprocess.run(
        [*command, event],
        input=json.dumps(payload).encode(),
        capture_output=True,
        cwd=cwd,
        timeout=60,
        check=False,
    )
    return {
        "event": event,
        "seconds": time.monotonic() - started,
        "code": done.returncode,
        "stdout": done.stdout.decode("utf-8", "replace"),
    }


def write_in_pieces(path: str, pieces: list[str], pause: float) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:  # truncates, as fs.writeFile does
        handle.flush()
        for piece in pieces:
            time.sleep(pause)
            handle.write(piece)
            handle.flush()


def main(argv: list[str]) -> int:
    config = json.loads(argv[0])
    results = []
    for action in config["script"]:
        if "hook" in action:
            results.append(
                run_hook(config["command"], action["hook"], action["payload"], config["cwd"])
            )
        elif "write" in action:
            write_in_pieces(action["write"], action["pieces"], action.get("pause", 0.0))
        elif "run" in action:
            subprocess.run(action["run"], cwd=config["cwd"], check=True, timeout=60)
        elif "sleep" in action:
            time.sleep(action["sleep"])
    with open(config["results"], "w", encoding="utf-8") as handle:
        json.dump({"pid": os.getpid(), "hooks": results}, handle)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
