"""Builds this recording: seeded, synthetic Vast.ai marketplace offers in the search API's wire format.

Run from this folder: `python _generate_offers.py`. Output is deterministic (seed below);
README.md says which parts are synthetic and where the ranges come from. Not imported by
the project; kept so the recording's provenance can be re-checked and rebuilt.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

SEED = 20261130
N_OFFERS = 360
PAGE_SIZE = 100
FIRST_ID = 12_400_000
HERE = Path(__file__).parent

# Vast gpu_name, gpu_ram (MiB, as nvidia-smi reports), on-demand USD per GPU-hour (low, median, high),
# GPU counts offered, weight, compute_cap, TFLOPS per GPU, GPU memory bandwidth GB/s.
GPUS = [
    ("RTX 4090", 24564, (0.31, 0.45, 0.88), [1, 1, 1, 2, 4, 8], 52, 890, 82.6, 1008),
    ("RTX 3090", 24576, (0.13, 0.19, 0.30), [1, 1, 2, 4, 8], 34, 860, 35.6, 936),
    ("RTX 5090", 32607, (0.45, 0.62, 0.95), [1, 1, 2, 4, 8], 30, 1200, 104.8, 1792),
    ("RTX A6000", 49140, (0.35, 0.44, 0.60), [1, 2, 4, 8], 16, 860, 38.7, 768),
    ("RTX 6000Ada", 49140, (0.60, 0.74, 0.95), [1, 2, 4, 8], 12, 890, 91.1, 960),
    ("L40S", 46068, (0.55, 0.70, 0.95), [1, 2, 4, 8], 12, 890, 91.6, 864),
    ("L40", 46068, (0.60, 0.68, 0.90), [1, 2, 4, 8], 5, 890, 90.5, 864),
    ("A40", 46068, (0.30, 0.36, 0.45), [1, 2, 4, 8], 6, 860, 37.4, 696),
    ("A100 SXM4", 81920, (0.78, 1.10, 1.70), [1, 2, 4, 8], 12, 800, 19.5, 2039),
    ("A100 PCIE", 81920, (0.70, 0.95, 1.40), [1, 2, 4, 8], 6, 800, 19.5, 1935),
    ("A100 PCIE", 40536, (0.45, 0.60, 0.90), [1, 2, 4], 3, 800, 19.5, 1555),
    ("A100X", 81920, (0.80, 0.95, 1.20), [1, 2], 2, 800, 19.5, 2039),
    ("H100 SXM", 81559, (1.85, 2.40, 2.50), [1, 2, 4, 8, 8], 16, 900, 66.9, 3352),
    ("H100 PCIE", 81559, (1.50, 1.85, 2.20), [1, 2, 4], 5, 900, 51.2, 2039),
    ("H100 NVL", 95830, (1.80, 2.20, 2.60), [1, 2, 4, 8], 4, 900, 60.0, 3938),
    ("H200", 143771, (2.50, 3.10, 3.60), [1, 8, 8], 5, 900, 66.9, 4800),
    ("B200", 183359, (3.50, 4.40, 5.50), [8], 3, 1000, 75.0, 7700),
    ("Tesla V100", 16160, (0.15, 0.22, 0.35), [1, 2, 4, 8], 5, 700, 15.7, 900),
    ("Tesla T4", 15360, (0.10, 0.13, 0.20), [1, 2, 4], 3, 750, 8.1, 320),
    ("Q RTX 6000", 24576, (0.20, 0.26, 0.35), [1, 2, 4, 8], 3, 750, 16.3, 672),
    ("A10", 23028, (0.20, 0.26, 0.35), [1, 2], 3, 860, 31.2, 600),
    ("L4", 23034, (0.25, 0.31, 0.40), [1, 2, 4, 8], 4, 890, 30.3, 300),
    ("RTX 4080", 16376, (0.18, 0.22, 0.30), [1, 2], 4, 890, 48.7, 717),
    ("RTX PRO 6000 WS", 97887, (0.90, 1.10, 1.40), [1, 2, 4, 8], 5, 1200, 110.0, 1792),
    ("Tesla P100", 16384, (0.10, 0.13, 0.20), [1, 2, 4], 2, 600, 9.5, 732),
    # Cards our canonical table does not know, named as Vast names them: they must be quarantined.
    ("RTX 3060", 12288, (0.05, 0.07, 0.10), [1, 1, 2], 8, 860, 12.7, 360),
    ("RTX A5000", 24564, (0.18, 0.22, 0.30), [1, 2, 4], 5, 860, 27.8, 768),
    ("RTX 4070S Ti", 16376, (0.12, 0.15, 0.20), [1, 2], 3, 890, 44.1, 672),
    ("GTX 1080 Ti", 11264, (0.05, 0.07, 0.10), [1, 2, 4], 2, 610, 11.3, 484),
]

# geolocation strings as Vast writes them ("<state or country>, <ISO code>"), with weights.
PLACES = [
    ("Texas, US", 7), ("California, US", 6), ("Virginia, US", 4), ("Washington, US", 3), ("Oregon, US", 3),
    ("Nevada, US", 2), ("Ohio, US", 2), ("New York, US", 2), ("Georgia, US", 2), ("Utah, US", 2),
    ("Quebec, CA", 4), ("Ontario, CA", 2), ("British Columbia, CA", 1),
    ("Sweden, SE", 3), ("Norway, NO", 3), ("Finland, FI", 2), ("Iceland, IS", 1), ("Germany, DE", 3),
    ("Netherlands, NL", 2), ("Poland, PL", 3), ("Czechia, CZ", 2), ("France, FR", 2), ("Spain, ES", 2),
    ("United Kingdom, GB", 2), ("Belgium, BE", 1), ("Bulgaria, BG", 2), ("Romania, RO", 2), ("Ukraine, UA", 2),
    ("Taiwan, TW", 3), ("Japan, JP", 2), ("South Korea, KR", 2), ("Vietnam, VN", 2), ("Thailand, TH", 1),
    ("India, IN", 1), ("Hong Kong, HK", 2), ("Singapore, SG", 1), ("Brazil, BR", 1), ("Australia, AU", 1),
    (None, 2),
]


def around_median(rng: random.Random, lo: float, median: float, hi: float) -> float:
    """Half the draws below the median, half above: the range's median is the given one."""
    return rng.uniform(lo, median) if rng.random() < 0.5 else rng.uniform(median, hi)


def make_offer(rng: random.Random, oid: int) -> dict:
    name, ram, (lo, median, hi), counts, _, cc, tflops, bw = rng.choices(GPUS, weights=[g[4] for g in GPUS])[0]
    place = rng.choices(PLACES, weights=[p[1] for p in PLACES])[0][0]
    n = rng.choice(counts)
    host_gpus = rng.choice([g for g in (1, 2, 4, 8, 10) if g >= n])
    frac = n / host_gpus
    cores = rng.choice([16, 24, 32, 48, 64, 96, 128, 192, 256])
    cpu_ram = rng.choice([64, 128, 256, 512, 1024, 2048]) * 1000 + rng.randint(0, 999)
    per_gpu = around_median(rng, lo, median, hi) * (0.97 if n >= 4 else 1.0)
    storage_cost = round(rng.choice([0.05, 0.08, 0.1, 0.1, 0.15, 0.2, 0.25, 0.3]) + rng.random() * 0.02, 4)
    disk = round(rng.choice([50, 100, 200, 500, 1000, 2000, 4000]) * (0.8 + rng.random() * 0.4), 1)
    storage_per_hour = storage_cost / 30 / 24 * 5.0  # allocated_storage 5 GiB
    dph_base = round(per_gpu * n, 4)
    dph_total = round(dph_base + storage_per_hour, 6)
    min_bid = round(dph_total * rng.uniform(0.35, 0.75), 4)
    inet_up_cost = 0.0 if rng.random() < 0.25 else round(rng.uniform(0.001, 0.02), 4)
    inet_down_cost = 0.0 if rng.random() < 0.35 else round(rng.uniform(0.001, 0.01), 4)
    reliability = round(rng.uniform(0.80, 0.9999) if rng.random() < 0.1 else rng.uniform(0.97, 0.9999), 4)
    machine_id = rng.randint(9_000, 46_000)
    inet_down = round(rng.choice([100, 500, 800, 1000, 2000, 5000, 8000]) * rng.uniform(0.7, 1.0), 1)
    inet_up = round(inet_down * rng.uniform(0.3, 1.0), 1)
    return {
        "id": oid, "ask_contract_id": oid, "bundle_id": rng.randint(300_000_000, 400_000_000),
        "machine_id": machine_id, "host_id": rng.randint(50_000, 400_000),
        "gpu_name": name, "num_gpus": n, "gpu_ram": ram, "gpu_total_ram": ram * n, "gpu_frac": round(frac, 4),
        "gpu_arch": "nvidia", "gpu_mem_bw": float(bw), "compute_cap": cc, "total_flops": round(tflops * n, 2),
        "bw_nvlink": round(rng.choice([0.0, 0.0, 0.0, 112.5]) if n > 1 else 0.0, 1),
        "cpu_name": rng.choice(["AMD EPYC 7543 32-Core Processor", "AMD EPYC 9354 32-Core Processor",
                                "Intel Xeon Gold 6338", "AMD Ryzen 9 7950X 16-Core Processor",
                                "Intel Core i9-13900K"]),
        "cpu_arch": "amd64", "cpu_cores": cores, "cpu_cores_effective": round(cores * frac, 1),
        "cpu_ghz": round(rng.uniform(2.0, 4.5), 1), "cpu_ram": cpu_ram, "has_avx": 1,
        "disk_space": disk, "disk_bw": round(rng.uniform(800, 7000), 1), "disk_name": "nvme",
        "dph_base": dph_base, "dph_total": dph_total, "min_bid": min_bid,
        "storage_cost": storage_cost, "storage_total_cost": round(storage_per_hour, 6),
        "inet_up": inet_up, "inet_down": inet_down, "inet_up_cost": inet_up_cost, "inet_down_cost": inet_down_cost,
        "internet_up_cost_per_tb": round(inet_up_cost * 1000, 2),
        "internet_down_cost_per_tb": round(inet_down_cost * 1000, 2),
        "reliability": reliability, "reliability2": reliability,
        "dlperf": round(tflops * n * rng.uniform(0.8, 1.2), 2),
        "dlperf_per_dphtotal": round(tflops * n / dph_total, 2),
        "flops_per_dphtotal": round(tflops * n / dph_total, 2),
        "geolocation": place, "geolocode": rng.randint(100_000, 9_999_999) if place else None,
        "verification": "verified", "rentable": True, "rented": False, "external": False, "is_bid": False,
        "direct_port_count": rng.choice([8, 16, 32, 100, 1000]), "pci_gen": rng.choice([3.0, 4.0, 5.0]),
        "pcie_bw": round(rng.uniform(10, 55), 1), "cuda_max_good": rng.choice([12.2, 12.4, 12.6, 12.8]),
        "driver_version": rng.choice(["550.120", "560.35.03", "570.124.04"]),
        "static_ip": rng.random() < 0.6, "hosting_type": rng.choice([0, 0, 1]),
        "duration": round(rng.uniform(3, 180) * 86400, 1), "end_date": 1_790_000_000 + rng.randint(0, 9_000_000),
        "score": round(rng.uniform(10, 400), 3), "os_version": "22.04", "vms_enabled": False,
    }


def main() -> None:
    rng = random.Random(SEED)
    offers, oid = [], FIRST_ID
    for _ in range(N_OFFERS):
        oid += rng.randint(1, 4000)
        offers.append(make_offer(rng, oid))
    # Edge cases a marketplace really shows: a host listing at 0, a broken bid, an absurd price.
    offers[17]["dph_total"] = 0.0
    offers[17]["dph_base"] = 0.0
    offers[17]["min_bid"] = 0.0
    offers[123]["min_bid"] = -0.01
    offers[211]["dph_total"] = 9999.0
    offers[211]["dph_base"] = 9999.0
    pages = [offers[i:i + PAGE_SIZE] for i in range(0, len(offers), PAGE_SIZE)] + [[]]
    exchanges, cursor = [], None
    (HERE / "search").mkdir(exist_ok=True)
    for n, page in enumerate(pages, 1):
        rel = f"search/page-{n}.json"
        (HERE / rel).write_text(json.dumps({"offers": page}, indent=1) + "\n")
        match = {"type": "on-demand", "order": [["id", "asc"]], "rentable": {"eq": True},
                 "id": {"gt": cursor} if cursor is not None else None}
        exchanges.append({"host": "console.vast.ai", "method": "POST", "path": "/api/v0/bundles/",
                          "match": {"json": match},
                          "response": {"status": 200, "headers": {"Content-Type": "application/json"},
                                       "body_file": rel}})
        if page:
            cursor = page[-1]["id"]
    manifest = {"provider": "vastai", "recorded_at": "2026-11-30T00:00:00Z",
                "settings": {"vastai_page_size": PAGE_SIZE}, "exchanges": exchanges}
    (HERE / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")


if __name__ == "__main__":
    main()
