"""Shared pieces of the benchmarks: results, timing, memory, and the summary table."""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

REPO = Path(__file__).resolve().parents[1]


@dataclass
class Result:
    """One line of the summary table.

    figure/target in `unit`; `ok` says whether the figure meets the target (`better` tells
    which way: "lower" or "higher"). `ratio` is against the baseline measured in the same run
    (`ratio_label` says which way it was divided), `ratio_target` the ratio the issue asks for
    (None: the ratio is reported, not judged).
    """

    bench: str
    name: str
    figure: float
    unit: str
    target: float | None
    better: str = "lower"
    ratio: float | None = None
    ratio_label: str = ""
    ratio_target: float | None = None
    better_ratio: str = "higher"
    notes: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        good = True
        if self.target is not None:
            good = self.figure <= self.target if self.better == "lower" else self.figure >= self.target
        if self.ratio_target is not None and self.ratio is not None:
            good = good and (self.ratio >= self.ratio_target if self.better_ratio == "higher"
                             else self.ratio <= self.ratio_target)
        return good

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["ok"] = self.ok
        return d


def fmt(x: float | None, unit: str = "") -> str:
    if x is None:
        return "-"
    if unit in ("s",) and x < 1:
        return f"{x * 1000:.1f} ms"
    if abs(x) >= 100:
        text = f"{x:,.0f}"
    elif abs(x) >= 10:
        text = f"{x:.1f}"
    else:
        text = f"{x:.2f}"
    return f"{text} {unit}".strip()


def table(results: list[Result]) -> str:
    rows = [("#", "benchmark", "figure", "target", "ratio vs baseline", "pass")]
    for r in results:
        target = "-" if r.target is None else ("<= " if r.better == "lower" else ">= ") + fmt(r.target, r.unit)
        ratio = "-" if r.ratio is None else f"{r.ratio:.2f}x {r.ratio_label}".strip()
        if r.ratio_target is not None:
            ratio += f" (need {'>=' if r.better_ratio == 'higher' else '<='} {r.ratio_target:g}x)"
        rows.append((r.bench, r.name, fmt(r.figure, r.unit), target, ratio, "PASS" if r.ok else "FAIL"))
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(rows[0]))]
    out = []
    for j, row in enumerate(rows):
        out.append("| " + " | ".join(str(c).ljust(w) for c, w in zip(row, widths)) + " |")
        if j == 0:
            out.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(out)


def say(*args: Any) -> None:
    print(*args, flush=True)


def best_of(n: int, fn: Callable[[], Any]) -> tuple[float, Any]:
    """Shortest wall time of n runs (the least noise-affected estimate) and the last result."""
    best = float("inf")
    out = None
    for _ in range(n):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def percentile(samples: list[float], p: float) -> float:
    xs = sorted(samples)
    if len(xs) == 1:
        return xs[0]
    k = (len(xs) - 1) * p / 100
    lo = int(k)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def median(xs: list[float]) -> float:
    return statistics.median(xs)


def peak_rss_self_mb() -> float:
    """This process's peak resident set since its exec (VmHWM), in MB; ru_maxrss where /proc is
    missing. ru_maxrss is not used first: Linux carries it over from the process that forked this
    one (a large benchmark process)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _pss_kb(pid: int | str) -> int:
    """Proportional set size of one process (/proc/PID/smaps_rollup), in KiB: its private pages
    plus its share of the pages it shares (libraries, pages a fork left shared), so a process
    tree's sum counts each page once."""
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            if line.startswith("Pss:"):
                return int(line.split()[1])
    return 0


def _tree_memory_kb(pid: int, parts: list[tuple[int, int]] | None = None) -> tuple[int, int]:
    """(summed RSS, summed PSS) of pid and all its descendants (from /proc), in KiB; `parts`, when
    given, receives each process's (PSS, pid)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    page_kb = os.sysconf("SC_PAGE_SIZE") // 1024
    rss = pss = 0
    stack = [pid]
    while stack:
        p = stack.pop()
        stack.extend(children.get(p, []))
        try:
            with open(f"/proc/{p}/statm") as f:
                rss += int(f.read().split()[1]) * page_kb
            own = _pss_kb(p)
            pss += own
            if parts is not None:
                parts.append((own, p))
        except (OSError, IndexError, ValueError):
            continue  # ended between the listing and the read
    return rss, pss


def _command_name(pid: int) -> str:
    """A process's command line, short: enough to tell a fetch child from a crawl or a browser."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            words = f.read().split(b"\0")
    except OSError:
        return f"(pid {pid}, ended)"
    text = " ".join(w.decode(errors="replace").rsplit("/", 1)[-1] for w in words[:4] if w)
    return text[:60]


# Linux carries a process's peak RSS across fork and exec: a child of this (large) process would
# report at least our own peak as its ru_maxrss. So the command is started by a small launcher
# process, whose own children start from its few MB, and the launcher reports their wait4 rusage.
_LAUNCHER = """
import json, os, sys
pid = os.posix_spawnp(sys.argv[2], sys.argv[2:], os.environ)
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as f:
    json.dump({"maxrss_kb": usage.ru_maxrss, "cpu_s": usage.ru_utime + usage.ru_stime,
               "code": os.waitstatus_to_exitcode(status)}, f)
"""


TREE_SAMPLE_S = 0.05  # how often run_measured samples the process tree's memory


def run_measured(cmd: list[str], env: dict[str, str] | None = None, cwd: Path | None = None,
                 timeout: float = 1800, sample_s: float | None = TREE_SAMPLE_S) -> dict[str, Any]:
    """Run a command; return its exit code, output, wall time, its own peak RSS (ru_maxrss from
    wait4, via a small launcher process) and the peaks of its process tree's summed RSS and
    summed PSS (sampled from /proc; the launcher's few MB included), with each process's PSS at
    that peak, and the CPU seconds of the command and the descendants it waited for.

    sample_s=None: no tree sampling (its peaks are None). A run timed against another should not
    be sampled: reading every process's smaps_rollup each 50 ms costs about a quarter of a core
    during a world refresh, which on 2 cores slows a run that uses both more than one that uses one.
    """
    import tempfile

    with tempfile.NamedTemporaryFile("r", suffix=".json") as report:
        t0 = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-S", "-c", _LAUNCHER, report.name, *cmd], env=env,
                                cwd=cwd or REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        peak_tree = [0, 0]
        at_peak: list[tuple[int, str]] = []
        done = threading.Event()

        def sample() -> None:
            while not done.is_set():
                parts: list[tuple[int, int]] = []
                rss, pss = _tree_memory_kb(proc.pid, parts)
                peak_tree[0] = max(peak_tree[0], rss)
                if pss > peak_tree[1]:  # named only at a new peak: the sampler shares the cores it measures
                    peak_tree[1] = pss
                    at_peak[:] = [(kb, _command_name(p)) for kb, p in sorted(parts, reverse=True)]
                done.wait(sample_s)

        sampler = threading.Thread(target=sample, daemon=True)
        if sample_s is not None:
            sampler.start()
        try:
            stdout, stderr = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            stdout, stderr = proc.communicate()
        wall = time.perf_counter() - t0
        done.set()
        if sample_s is not None:
            sampler.join()
        try:
            doc = json.loads(Path(report.name).read_text() or "{}")
        except ValueError:
            doc = {}
    return {"returncode": doc.get("code", proc.returncode or -1), "wall_s": wall,
            "peak_rss_mb": doc.get("maxrss_kb", 0) / 1024,
            "peak_tree_rss_mb": peak_tree[0] / 1024 if sample_s is not None else None,
            "peak_tree_pss_mb": peak_tree[1] / 1024 if sample_s is not None else None,
            "cpu_s": doc.get("cpu_s", 0.0),
            "pss_at_peak_mb": [(round(kb / 1024), name) for kb, name in at_peak],
            "stdout": stdout, "stderr": stderr}


def peak_parts_line(res: dict[str, Any], most: int = 8) -> str:
    """The largest processes of run_measured's PSS peak, for a benchmark's log."""
    return "PSS at that peak, MB: " + ", ".join(f"{mb} {name}" for mb, name in res["pss_at_peak_mb"][:most])


def run_worker(module: str, args: list[str], timeout: float = 1800) -> dict[str, Any]:
    """Run `python -m module args` (a benchmark worker printing one JSON line last); return that
    JSON with the child's peak RSS added."""
    res = run_measured([sys.executable, "-m", module, *args], timeout=timeout)
    if res["returncode"] != 0:
        raise RuntimeError(f"{module} {args} failed ({res['returncode']}):\n{res['stderr'][-3000:]}")
    lines = [ln for ln in res["stdout"].splitlines() if ln.startswith("{")]
    doc = json.loads(lines[-1])
    doc["child_peak_rss_mb"] = res["peak_rss_mb"]
    doc["child_wall_s"] = res["wall_s"]
    return doc


def tmp_root() -> Path:
    """Where generated data goes (GPULEDGER_BENCH_TMP, default /tmp/gpuledger-bench)."""
    root = Path(os.environ.get("GPULEDGER_BENCH_TMP", "/tmp/gpuledger-bench"))
    root.mkdir(parents=True, exist_ok=True)
    return root


@contextmanager
def prefect_api() -> Iterator[str]:
    """A Prefect API server for the refreshes of a benchmark, as a deployment runs against a
    server already up: each refresh's wall time is then the refresh's, not Prefect's start-up
    (9-35 s here, more on a loaded machine). A PREFECT_API_URL already set is used instead."""
    if os.environ.get("PREFECT_API_URL"):
        yield os.environ["PREFECT_API_URL"]
        return
    from gpuledger.flows.prefect_api import TemporaryApiServer

    server = TemporaryApiServer()  # the server `gpuledger refresh` starts when none is configured
    try:
        yield server.wait_ready(600)
    finally:
        server.stop()


@contextmanager
def shared_prefect_api() -> Iterator[str]:
    """One Prefect API server for every benchmark of a `python -m bench` run: its URL goes to the
    child processes' environment and to this process's Prefect settings (benchmark 1 runs its
    flows in this process), so the server starts once, not once per benchmark."""
    from gpuledger.flows.prefect_api import api_url_set

    with prefect_api() as url, api_url_set(url):
        yield url
