"""Vultr at plan-list size: `/v2/plans` and `/v2/plans-metal` with every plan, one page each.

A real answer lists a few hundred plans (adapters/recordings/vultr/README.md; the adapter's
`MAX_PAGES` note says the same); 300 instance plans and 12 bare-metal plans are an estimate of
that, not a count, and fit one page each at `per_page=500`. The bundled bodies keep every GPU
plan they price, so the offers are the real ones; the world bodies add CPU plans of Vultr's
types (vc2, vhf, vhp, voc; ids in Vultr's pattern, prices made up) up to that length.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from gpuledger.adapters import vultr
from gpuledger.adapters.replay import BUNDLED_RECORDINGS

from bench.world.writer import ProviderRecording

SIZES = {"world": (300, 12), "small": (20, 5)}
HOURS_PER_MONTH = 730
# (type, id prefix, GiB RAM per vCPU, USD per vCPU-month)
TYPES = [("vc2", "vc2", 2, 5.0), ("vhf", "vhf", 2, 6.0), ("vhp", "vhp", 2, 6.0), ("voc", "voc-c", 2, 7.0),
         ("voc", "voc-g", 4, 10.0), ("voc", "voc-m", 8, 12.5), ("voc", "voc-s", 8, 15.0)]
VCPUS = (1, 2, 4, 6, 8, 12, 16, 24, 32, 40, 48, 64, 80, 96)
DISKS = (1, 2, 3, 4)  # variants of one size by disk (Vultr lists a plan per disk size)


def padded(doc: dict[str, Any], key: str, target: int, metal: bool) -> dict[str, Any]:
    template = next(p for p in doc[key] if p.get("gpu_count") in (None, 0, "0") and not p.get("gpu_type"))
    ids = {p["id"] for p in doc[key]}
    out = list(doc[key])
    for disks in DISKS:
        for vcpus in VCPUS:
            for kind, prefix, ram_per_vcpu, per_vcpu_month in TYPES:
                if len(out) >= target:
                    break
                ram_gb = vcpus * ram_per_vcpu
                plan_id = (f"vbm-{vcpus}c-{ram_gb}gb-{disks}d" if metal
                           else f"{prefix}-{vcpus}c-{ram_gb}gb" + (f"-{disks}d" if disks > 1 else ""))
                if plan_id in ids:
                    continue
                plan = copy.deepcopy(template)
                monthly = round(per_vcpu_month * vcpus * (4 if metal else 1) + 5 * (disks - 1), 2)
                plan.update(id=plan_id, ram=ram_gb * 1024, disk=32 * vcpus * disks, monthly_cost=monthly,
                            hourly_cost=round(monthly / HOURS_PER_MONTH, 4))
                plan["cpu_count" if metal and "cpu_count" in plan else "vcpu_count"] = vcpus
                if "type" in plan and not metal:
                    plan["type"] = kind
                ids.add(plan_id)
                out.append(plan)
    return {**doc, key: out, "meta": {"total": len(out), "links": {"next": "", "prev": ""}}}


def generate(root: Path, scale: str) -> dict[str, Any]:
    folder = BUNDLED_RECORDINGS / "vultr"
    bundled = json.loads((folder / "manifest.json").read_text())
    plans_target, metal_target = SIZES[scale]
    bodies = {vultr.PLANS_PATH: padded(json.loads((folder / "plans.json").read_text()), "plans", plans_target, False),
              vultr.METAL_PATH: padded(json.loads((folder / "plans-metal.json").read_text()), "plans_metal",
                                       metal_target, True)}
    rec = ProviderRecording(root, "vultr", recorded_at="2026-12-02T00:00:00Z", settings=bundled["settings"])
    for exchange in bundled["exchanges"]:
        rec.add(exchange["host"], exchange["path"], json.dumps(bodies[exchange["path"]], indent=1),
                body_file=exchange["response"]["body_file"], match=exchange["match"],
                headers=exchange["response"]["headers"])
    return rec.close()
