"""Benchmark 4: a refresh of an unchanged world against a full one, in bytes fetched and wall time.

`python -m bench.unchanged [--quick]`: the world replay of benchmark 1 (bench/world_lines.py,
generated or reused), twice: with AWS read as a user without an AWS account reads it (the public
price list, 4.7 GB at world scale: AWS_PUBLIC_ONLY_ENV), then as a user with credentials and the
bulk price list (the EC2 API answers, which validate nothing, and each versioned offer file parsed
once: `<db>.cache/`). Each time one `gpuledger refresh --replay` into a new
warehouse, then a second into the same warehouse with nothing changed: the replay server's log
gives the bytes each refresh was sent, per provider; the command its wall time. Sources that
validate their answers (AWS's price list version index, an ETag or Last-Modified date where a
recording carries one) fetch only that the second time; the others fetch in full.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Any, Sequence

from bench.common import Result, prefect_api, run_measured, say, tmp_root
from bench.world_lines import AWS_PUBLIC_ONLY_ENV, bytes_by_provider, host_providers, refresh_command, \
    replay_process, world_folder

BYTES_TARGET_PCT = 2.0  # the unchanged refresh fetches at most this share of the full one's bytes


AWS_EC2_BULK_ENV = {"GPULEDGER_AWS_PRICE_SOURCE": "bulk", "GPULEDGER_AWS_EC2_API": "auto"}


def _refresh(world: Path, work: Path, db: Path, api_url: str, hosts: dict[str, str],
             providers: Sequence[str], aws_env: dict[str, str]) -> tuple[float, dict[str, dict[str, int]]]:
    with replay_process(world, work) as server:
        env = dict(os.environ, GPULEDGER_DB=str(db), PREFECT_API_URL=api_url, **aws_env)
        res = run_measured(refresh_command(server["endpoints"], providers), env=env, timeout=3600, sample_s=None)
    if res["returncode"] != 0:
        raise RuntimeError(f"gpuledger refresh failed ({res['returncode']}):\n{res['stdout'][-1500:]}\n"
                           f"{res['stderr'][-2500:]}")
    return res["wall_s"], bytes_by_provider(server.get("sent", []), hosts)


def run(quick: bool = False, world: Path | None = None, providers: Sequence[str] = ()) -> list[Result]:
    scale = "small" if quick else "world"
    if world is None:
        world = world_folder(scale, providers or None)[0]
    hosts = host_providers(world)
    with prefect_api() as api_url:
        return [arm(line, how, aws_env, scale, world, hosts, api_url, providers) for line, how, aws_env in (
            ("4", "AWS from its public price list", AWS_PUBLIC_ONLY_ENV),
            ("4b", "AWS with EC2 credentials and the bulk price list", AWS_EC2_BULK_ENV))]


def arm(number: str, how: str, aws_env: dict[str, str], scale: str, world: Path, hosts: dict[str, str],
        api_url: str, providers: Sequence[str]) -> Result:
    say(f"[{number}] unchanged world refresh against a full one ({scale} scale, {how})")
    work = tmp_root() / "unchanged"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    full_s, full = _refresh(world, work, work / "ledger.duckdb", api_url, hosts, providers, aws_env)
    same_s, same = _refresh(world, work, work / "ledger.duckdb", api_url, hosts, providers, aws_env)
    shutil.rmtree(work, ignore_errors=True)
    total = {name: sum(b["bytes"] for b in run.values()) for name, run in (("full", full), ("same", same))}
    say(f"  {'provider':<20} {'full MB':>10} {'unchanged MB':>13}")
    for p in sorted(full):
        say(f"  {p:<20} {full[p]['bytes'] / 1e6:>10.2f} {same.get(p, {'bytes': 0})['bytes'] / 1e6:>13.3f}")
    pct = 100.0 * total["same"] / total["full"]
    aws: dict[str, Any] = {k: v.get("aws", {"bytes": 0})["bytes"] for k, v in (("full", full), ("same", same))}
    line = (f"unchanged refresh: {total['same'] / 1e6:,.1f} MB in {same_s:.1f} s; full: {total['full'] / 1e6:,.1f} MB "
            f"in {full_s:.1f} s; AWS {aws['same'] / 1e6:,.2f} MB against {aws['full'] / 1e6:,.0f} MB")
    say(f"  {line}")
    # Judged at world scale only: there AWS's offer files are nearly all the bytes; at small scale the providers
    # that fetch in full every time (no validator to send) outweigh them.
    judged = scale == "world"
    return Result(number, f"bytes an unchanged world refresh fetches, % of a full one's ({scale} scale, {how}"
                  f"{'' if judged else '; judged at world scale only'})", pct,
                  "%", BYTES_TARGET_PCT if judged else None, ratio=same_s / full_s, ratio_label="wall / full refresh's (informational)",
                  notes=line, extra={"full_s": full_s, "unchanged_s": same_s, "bytes": total, "aws": aws,
                                     "by_provider": {"full": full, "unchanged": same}})


if __name__ == "__main__":
    results = run(quick="--quick" in sys.argv[1:])
    sys.exit(0 if all(r.ok for r in results) else 1)
