"""The process a Python controller runs in on real Linux (`critmem run --platform linux`, the
agent): the Rust control loop starts `python -m critmem.controller_host` and talks to it in
JSON lines on stdin and stdout (see crates/linux/src/external.rs). The class is loaded and
called exactly as in the simulator (`critmem.plugins`). Prints of the user's code go to
stderr: stdout carries only the protocol. With CRITMEM_DEBUG=1 a failure's traceback is
printed on stderr too."""

from __future__ import annotations

import json
import os
import sys
import traceback
from typing import Any, TextIO

from critmem import plugins


def _error(e: BaseException) -> dict[str, Any]:
    if os.environ.get("CRITMEM_DEBUG") == "1":
        traceback.print_exception(e.__cause__ or e, file=sys.stderr)
    message = str(e) if isinstance(e, plugins.PluginError) else f"{type(e).__name__}: {e}"
    return {"error": " ".join(message.split()), "not_found": isinstance(e, plugins.PluginNotFound)}


def serve(requests: TextIO, replies: TextIO) -> None:
    """Answers requests until the loop closes the pipe."""
    instance: Any = None
    for line in requests:
        request = json.loads(line)
        try:
            if "load" in request:
                instance, name, interval_ns = plugins.build_controller(request["load"], json.dumps(request.get("params") or {}))
                reply: dict[str, Any] = {"ok": {"name": name, "interval_ns": interval_ns}}
            elif instance is None:
                reply = {"error": "no controller is loaded"}
            else:
                reply = {"actions": plugins.controller_tick_wire(instance, request["tick"])}
        except Exception as e:  # noqa: BLE001 — every failure is answered, one line
            reply = _error(e)
        replies.write(json.dumps(reply) + "\n")
        replies.flush()


def main() -> None:
    protocol = sys.stdout
    # print() in the user's code must not reach the protocol.
    sys.stdout = sys.stderr
    directory = os.environ.get("CRITMEM_SCENARIO_DIR")
    with plugins.scenario_dir(directory):
        serve(sys.stdin, protocol)


if __name__ == "__main__":
    main()
