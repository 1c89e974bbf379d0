"""Shared helpers of the Python benchmarks: a topology from `sr-topology`, probes, percentiles."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import threading
from pathlib import Path
from typing import Any, Dict, List, Optional

REPO = Path(__file__).resolve().parents[2]


def sr_topology_path() -> str:
    target = Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))
    path = target / "debug" / "sr-topology"
    if not path.exists():
        subprocess.run(["cargo", "build", "-q", "-p", "sentinel-recovery-testkit", "--bins"], cwd=REPO, check=True)
    return str(path)


class Topology:
    """`sr-topology up --json` with stdin commands; EOF tears it down."""

    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen([sr_topology_path(), "up", "--json", *args], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, bufsize=1)
        self._lines: "queue.Queue[Optional[str]]" = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.info: Dict[str, Any] = json.loads(self._line(60))
        self.url: str = self.info["url"]

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def _line(self, timeout: float) -> str:
        line = self._lines.get(timeout=timeout)
        if line is None:
            raise RuntimeError("sr-topology exited")
        return line

    def cmd(self, line: str, timeout: float = 60) -> Dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        return json.loads(self._line(timeout))

    @property
    def primary(self) -> Dict[str, Any]:
        return self.info["primary"]

    def close(self) -> None:
        end_process(self.proc)

    def __enter__(self) -> "Topology":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def end_process(proc: "subprocess.Popen[str]", farewell: Optional[str] = None) -> None:
    """Ends a child driven over stdin: sends `farewell` if given, closes stdin (EOF), waits up to
    30 s, then kills it (by its own pid) and reaps it."""
    try:
        assert proc.stdin is not None
        if farewell is not None:
            proc.stdin.write(farewell)
        proc.stdin.close()
    except OSError:
        pass
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def percentile(values: List[float], p: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    k = min(len(s) - 1, max(0, int(round(p / 100.0 * (len(s) - 1)))))
    return s[k]
