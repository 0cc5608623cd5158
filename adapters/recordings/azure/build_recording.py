"""Builds the Azure replay recording: Retail Prices API pages in the API's exact wire format.

Run from the repository root:  python adapters/recordings/azure/build_recording.py

Where every value comes from is in README.md next to this file. In short: the page
envelope and item shape are those of the real pages in tests/fixtures/azure/; product
and meter names are real where README.md says so; prices marked REAL below were
published by the API (dates in README.md); every other price is derived from those
by the region factors below and is synthetic. The output is deterministic.
"""

from __future__ import annotations

import hashlib
import json
import sys
import uuid
from pathlib import Path
from urllib.parse import quote

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2]))

from gpuledger.adapters.azure import (  # noqa: E402
    API_VERSION, BANDWIDTH_FILTER, PRICES_HOST, PRICES_PATH, STORAGE_FILTER, VM_FILTER,
)
from gpuledger.adapters.azure_eviction import (  # noqa: E402
    QUERY, RESOURCE_GRAPH_API_VERSION, RESOURCE_GRAPH_HOST, RESOURCE_GRAPH_PATH,
)

PAGE_SIZE = 100  # the live API pages at 1,000 items; 100 keeps several pages in a small recording

# region -> (billing "location", price factor vs. eastus for prices with no real value here)
# The first ten regions are those of the first recording; the rest extend it to every public
# region with GPU meters the builder knows of (README.md says which factors are real).
REGIONS = {
    "eastus": ("US East", 1.0),
    "eastus2": ("US East 2", 1.0),
    "westus2": ("US West 2", 1.0),
    "westus3": ("US West 3", 1.0),
    "southcentralus": ("US South Central", 1.2),  # REAL ratio: 4.408/3.673, 8.38/6.98, 0.631/0.526
    "northeurope": ("EU North", 1.1),
    "westeurope": ("EU West", 1.3),  # ND H100 v5: REAL Windows 132.232 vs eastus 102.736
    "swedencentral": ("SE Central", 1.1),
    "japaneast": ("JA East", 1.3),
    "southeastasia": ("AP Southeast", 1.25),
    # Added regions: factors are synthetic unless marked REAL.
    "centralus": ("US Central", 1.0),
    "northcentralus": ("US North Central", 1.0),
    "westus": ("US West", 1.1),
    "westcentralus": ("US West Central", 1.1),
    "canadacentral": ("CA Central", 1.1),
    "canadaeast": ("CA East", 1.1),
    "brazilsouth": ("BR South", 2.0),  # REAL ratio: NC24s_v3 24.48 vs eastus 12.24
    "uksouth": ("UK South", 1.15),
    "ukwest": ("UK West", 1.2),
    "francecentral": ("FR Central", 1.2),
    "germanywestcentral": ("DE West Central", 1.2),
    "switzerlandnorth": ("CH North", 1.35),
    "norwayeast": ("NO East", 1.3),
    "polandcentral": ("PL Central", 1.25),
    "italynorth": ("IT North", 1.25),
    "australiaeast": ("AU East", 1.3),
    "australiasoutheast": ("AU Southeast", 1.3),
    "japanwest": ("JA West", 1.3),
    "koreacentral": ("KR Central", 1.25),
    "centralindia": ("IN Central", 1.2),
    "southindia": ("IN South", 1.25),
    "jioindiacentral": ("IN Central Jio", 1.4),  # REAL ratio: NC24ads_A100_v4 5.142, NV36ads 4.48 (x1.4)
    "eastasia": ("AP East", 1.35),
    "uaenorth": ("AE North", 1.3),
    "southafricanorth": ("ZA North", 1.35),
    "qatarcentral": ("QA Central", 1.3),
}
FIRST_REGIONS = list(REGIONS)[:10]  # Windows meters are recorded here only (they are skipped anyway)
WINDOWS_PER_VCPU = 0.046  # REAL: ND96isr_H100_v5 eastus Windows 102.736 - Linux 98.32 = 4.416 = 96 x 0.046

VM_SERVICE_ID = "DZH313Z7MMC8"  # REAL (samples)
STORAGE_SERVICE_ID = "DZH317F1HKN0"  # REAL (samples)
BANDWIDTH_SERVICE_ID = "DZH3170D5CFL"  # synthetic


def _h(*parts: str, n: int = 4) -> str:
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:n].upper()


def _meter_id(*parts: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, "gpuledger-azure/" + "/".join(parts)))


# -- VM sizes in the recording ----------------------------------------------------------------
# arm size -> (meter/sku base name, product (Linux), Windows product or None if Linux-only,
#              vCPUs, eastus on-demand price, spot ratio or None, effectiveStartDate, savings plan?)
SIZES = {
    "Standard_NC4as_T4_v3": ("NC4as T4 v3", "Virtual Machines NCasT4 v3 Series", True, 4, 0.526, None, "2020-10-01", True),
    "Standard_NC8as_T4_v3": ("NC8as T4 v3", "Virtual Machines NCasT4 v3 Series", True, 8, 0.752, None, "2020-10-01", True),
    "Standard_NC16as_T4_v3": ("NC16as T4 v3", "Virtual Machines NCasT4 v3 Series", True, 16, 1.204, None, "2020-10-01", True),
    "Standard_NC64as_T4_v3": ("NC64as T4 v3", "Virtual Machines NCasT4 v3 Series", True, 64, 4.352, None, "2020-10-01", True),
    "Standard_NC8ads_A10_v4": ("NC8ads A10 v4", "Virtual Machines NCadsA10v4 Series", True, 8, 1.1, 0.25, "2023-02-01", True),
    "Standard_NC16ads_A10_v4": ("NC16ads A10 v4", "Virtual Machines NCadsA10v4 Series", True, 16, 2.2, 0.25, "2023-02-01", True),
    "Standard_NC32ads_A10_v4": ("NC32ads A10 v4", "Virtual Machines NCadsA10v4 Series", True, 32, 4.4, 0.25, "2023-02-01", True),
    "Standard_NV6ads_A10_v5": ("NV6ads A10 v5", "Virtual Machines NVadsA10v5 Series", True, 6, 0.454, 0.25, "2022-09-01", True),
    "Standard_NV12ads_A10_v5": ("NV12ads A10 v5", "Virtual Machines NVadsA10v5 Series", True, 12, 0.908, 0.25, "2022-09-01", True),
    "Standard_NV18ads_A10_v5": ("NV18ads A10 v5", "Virtual Machines NVadsA10v5 Series", True, 18, 1.6, 0.25, "2022-09-01", True),
    "Standard_NV36ads_A10_v5": ("NV36ads A10 v5", "Virtual Machines NVadsA10v5 Series", True, 36, 3.2, 0.25, "2022-09-01", True),
    "Standard_NV36adms_A10_v5": ("NV36adms A10 v5", "Virtual Machines NVadsA10v5 Series", True, 36, 4.52, 0.25, "2022-09-01", True),
    "Standard_NV72ads_A10_v5": ("NV72ads A10 v5", "Virtual Machines NVadsA10v5 Series", True, 72, 6.52, 0.25, "2022-09-01", True),
    "Standard_NC24ads_A100_v4": ("NC24ads A100 v4", "Virtual Machines NCads A100 v4 Series", True, 24, 3.673, None, "2022-07-01", True),
    "Standard_NC48ads_A100_v4": ("NC48ads A100 v4", "Virtual Machines NCads A100 v4 Series", True, 48, 7.346, None, "2022-07-01", True),
    "Standard_NC96ads_A100_v4": ("NC96ads A100 v4", "Virtual Machines NCads A100 v4 Series", True, 96, 14.692, None, "2022-07-01", True),
    "Standard_NC40ads_H100_v5": ("NC40ads H100 v5", "Virtual Machines NCadsH100v5 Series", True, 40, 6.98, None, "2023-11-01", True),
    "Standard_NC80adis_H100_v5": ("NC80adis H100 v5", "Virtual Machines NCadsH100v5 Series", True, 80, 13.96, None, "2023-11-01", True),
    "Standard_NCC40ads_H100_v5": ("NCC40ads H100 v5", "Virtual Machines NCCadsH100v5 Series", True, 40, 6.98, 0.25, "2024-05-01", False),
    "Standard_ND96asr_v4": ("ND96asr v4", "Virtual Machines NDasr A100 v4 Series", True, 96, 27.197, None, "2021-06-01", True),
    "Standard_ND96amsr_A100_v4": ("ND96amsr A100 v4", "Virtual Machines NDamsr A100 v4 Series Linux", True, 96, 32.77, None, "2021-11-01", True),
    "Standard_ND96isr_H100_v5": ("ND96isrH100v5", "Virtual Machines NDsr H100 v5 Series", True, 96, 98.32, 0.1848, "2023-08-01", True),
    "Standard_ND96isr_H200_v5": ("ND96isrH200v5", "Virtual Machines NDsrH200v5 Series", True, 96, 84.80, 0.20, "2025-02-01", True),
    "Standard_ND96isr_MI300X_v5": ("ND96isr MI300X v5", "Virtual Machines NDsr MI300X v5 Series", False, 96, 48.0, 0.20, "2024-06-01", True),
    "Standard_ND128isr_NDR_GB200_v6": ("ND128isrNDRGB200v6", "Virtual Machines NDsrGB200NDRv6 Series", False, 128, 108.16, None, "2025-04-01", False),
    "Standard_NV4as_v4": ("NV4as v4", "Virtual Machines NVasv4 Series", True, 4, 0.233, None, "2020-05-01", True),
    "Standard_NV8as_v4": ("NV8as v4", "Virtual Machines NVasv4 Series", True, 8, 0.466, None, "2020-05-01", True),
    "Standard_NV16as_v4": ("NV16as v4", "Virtual Machines NVasv4 Series", True, 16, 0.932, None, "2020-05-01", True),
    "Standard_NV32as_v4": ("NV32as v4", "Virtual Machines NVasv4 Series", True, 32, 1.864, None, "2020-05-01", True),
    "Standard_NG8ads_V620_v1": ("NG8ads V620 v1", "Virtual Machines NGadsV620 Series", True, 8, 0.908, 0.25, "2023-07-01", False),
    "Standard_NG16ads_V620_v1": ("NG16ads V620 v1", "Virtual Machines NGadsV620 Series", True, 16, 1.815, 0.25, "2023-07-01", False),
    "Standard_NG32ads_V620_v1": ("NG32ads V620 v1", "Virtual Machines NGadsV620 Series", True, 32, 3.63, 0.25, "2023-07-01", False),
    "Standard_NC6s_v3": ("NC6s v3", "Virtual Machines NCSv3 Series", True, 6, 3.06, None, "2017-12-01", True),
    "Standard_NC12s_v3": ("NC12s v3", "Virtual Machines NCSv3 Series", True, 12, 6.12, None, "2017-12-01", True),
    "Standard_NC24s_v3": ("NC24s v3", "Virtual Machines NCSv3 Series", True, 24, 12.24, None, "2017-12-01", True),
    "Standard_NC24rs_v3": ("NC24rs v3", "Virtual Machines NCSv3 Series", True, 24, 13.464, None, "2017-12-01", True),
    # NC RTX PRO 6000 BSE v6 (preview): no Spot meter; Linux prices REAL where REAL says so.
    "Standard_NC32ds_xl_RTXPRO6000BSE_v6": ("NC32ds xl RTXPRO6000BSE v6", "Virtual Machines NC RTXPRO6000BSE v6 Series", True, 32, 1.4355, None, "2026-06-01", False),
    "Standard_NC64ds_xl_RTXPRO6000BSE_v6": ("NC64ds xl RTXPRO6000BSE v6", "Virtual Machines NC RTXPRO6000BSE v6 Series", True, 64, 2.82, None, "2026-06-01", False),
    "Standard_NC128ds_xl_RTXPRO6000BSE_v6": ("NC128ds xl RTXPRO6000BSE v6", "Virtual Machines NC RTXPRO6000BSE v6 Series", True, 128, 6.38, None, "2026-06-01", False),
    "Standard_NC256ds_xl_RTXPRO6000BSE_v6": ("NC256ds xl RTXPRO6000BSE v6", "Virtual Machines NC RTXPRO6000BSE v6 Series", True, 256, 12.76, None, "2026-06-01", False),
    "Standard_NC32lds_xl_RTXPRO6000BSE_v6": ("NC32lds xl RTXPRO6000BSE v6", "Virtual Machines NC RTXPRO6000BSE v6 Series", True, 32, 1.243, None, "2026-06-01", False),
    "Standard_NC64lds_xl_RTXPRO6000BSE_v6": ("NC64lds xl RTXPRO6000BSE v6", "Virtual Machines NC RTXPRO6000BSE v6 Series", True, 64, 2.44, None, "2026-06-01", False),
    "Standard_NC128lds_xl_RTXPRO6000BSE_v6": ("NC128lds xl RTXPRO6000BSE v6", "Virtual Machines NC RTXPRO6000BSE v6 Series", True, 128, 5.50, None, "2026-06-01", False),
    "Standard_NC256lds_xl_RTXPRO6000BSE_v6": ("NC256lds xl RTXPRO6000BSE v6", "Virtual Machines NC RTXPRO6000BSE v6 Series", True, 256, 11.00, None, "2026-06-01", False),
    # In the feed, but on no current size page (so no documented GPU share): not in adapters/azure.py
    # GPU_SIZES on purpose; the adapter must quarantine them.
    "Standard_NC132lds_xl_RTXPRO6000BSE_v6": ("NC132lds xl RTXPRO6000BSE v6", "Virtual Machines NC RTXPRO6000BSE v6 Series", True, 132, 5.50, None, "2026-06-01", False),
    "Standard_NC16lds_xl_RTXPRO6000BSE_v6": ("NC16lds xl RTXPRO6000BSE v6", "Virtual Machines NC RTXPRO6000BSE v6 Series", True, 16, 0.62, None, "2026-06-01", False),
}
_ALL = list(REGIONS)
# Which size is sold where: the first ten regions as before; the added regions follow the public
# products-by-region pattern (T4 and A10 widest, the 8-GPU ND sizes in a few) and are synthetic.
_T4 = [r for r in _ALL if r not in ("westus3", "swedencentral")]
_NV = ["eastus", "southcentralus", "westeurope", "swedencentral", "eastus2", "westus2", "westus3", "centralus",
       "northcentralus", "westus", "canadacentral", "brazilsouth", "uksouth", "francecentral",
       "germanywestcentral", "switzerlandnorth", "norwayeast", "australiaeast", "japaneast", "koreacentral",
       "centralindia", "southeastasia", "uaenorth", "jioindiacentral"]
_A100 = FIRST_REGIONS + ["centralus", "canadacentral", "uksouth", "australiaeast", "koreacentral", "centralindia",
                         "jioindiacentral"]
_H100NC = ["eastus", "eastus2", "southcentralus", "westus3", "swedencentral", "japaneast", "australiaeast",
           "jioindiacentral"]
_NCV3 = ["eastus", "eastus2", "westus2", "southcentralus", "northeurope", "westeurope", "japaneast",
         "australiaeast", "uksouth", "brazilsouth", "jioindiacentral"]
_RTX = ["eastus", "eastus2", "westus2", "westus3"]
WHERE = {
    **{s: _T4 for s in SIZES if "_T4_" in s},
    **{s: ["westus3"] for s in SIZES if "_A10_v4" in s},
    **{s: _NV for s in SIZES if "_A10_v5" in s},
    **{s: _A100 for s in SIZES if "ads_A100_v4" in s},
    "Standard_NC40ads_H100_v5": _H100NC, "Standard_NC80adis_H100_v5": _H100NC,
    "Standard_NCC40ads_H100_v5": ["eastus2", "westeurope"],
    "Standard_ND96asr_v4": ["eastus", "westus2", "southcentralus", "westeurope", "japaneast", "uksouth"],
    "Standard_ND96amsr_A100_v4": ["eastus", "eastus2", "southcentralus", "westeurope", "westus3",
                                  "switzerlandnorth"],
    "Standard_ND96isr_H100_v5": ["eastus", "eastus2", "southcentralus", "westeurope", "swedencentral", "japaneast",
                                 "westus3", "uksouth", "australiaeast", "polandcentral", "centralus"],
    "Standard_ND96isr_H200_v5": ["eastus2", "westus3", "swedencentral", "italynorth", "southcentralus"],
    "Standard_ND96isr_MI300X_v5": ["eastus", "swedencentral", "canadacentral"],
    "Standard_ND128isr_NDR_GB200_v6": ["eastus", "westus3"],
    **{s: ["eastus", "westeurope", "southcentralus", "eastus2", "australiaeast"] for s in SIZES if s.endswith("as_v4")},
    **{s: ["eastus2", "westeurope", "westus3"] for s in SIZES if "_V620_" in s},
    **{s: _NCV3 for s in SIZES if s.endswith("s_v3") and "_T4_" not in s},
    **{s: _RTX for s in SIZES if "RTXPRO6000" in s},
    "Standard_NC132lds_xl_RTXPRO6000BSE_v6": ["eastus2"],
    "Standard_NC16lds_xl_RTXPRO6000BSE_v6": ["eastus2"],
}

# REAL prices: (size, region) -> (on-demand, spot or None). Sources in README.md.
REAL = {
    ("Standard_NC4as_T4_v3", "eastus"): (0.526, 0.062699),
    ("Standard_NC8as_T4_v3", "eastus"): (0.752, 0.089638),
    ("Standard_NC16as_T4_v3", "eastus"): (1.204, 0.143517),
    ("Standard_NC64as_T4_v3", "eastus"): (4.352, 0.518758),
    ("Standard_NC4as_T4_v3", "eastus2"): (0.526, 0.05786),
    ("Standard_NC8as_T4_v3", "eastus2"): (0.752, 0.08272),
    ("Standard_NC16as_T4_v3", "eastus2"): (1.204, 0.13244),
    ("Standard_NC64as_T4_v3", "eastus2"): (4.352, 0.47872),
    ("Standard_NC4as_T4_v3", "westus2"): (0.526, 0.061595),
    ("Standard_NC8as_T4_v3", "westus2"): (0.752, 0.088059),
    ("Standard_NC16as_T4_v3", "westus2"): (1.204, 0.140988),
    ("Standard_NC64as_T4_v3", "westus2"): (4.352, 0.509619),
    ("Standard_NC4as_T4_v3", "southcentralus"): (0.631, 0.06941),
    ("Standard_NC8as_T4_v3", "southcentralus"): (0.902, 0.09922),
    ("Standard_NC16as_T4_v3", "southcentralus"): (1.445, 0.15895),
    ("Standard_NC64as_T4_v3", "southcentralus"): (5.222, 0.57442),
    ("Standard_NC8ads_A10_v4", "westus3"): (1.1, 0.275),
    ("Standard_NC16ads_A10_v4", "westus3"): (2.2, 0.55),
    ("Standard_NC32ads_A10_v4", "westus3"): (4.4, 1.1),
    ("Standard_NV36ads_A10_v5", "eastus"): (3.2, 0.8),
    ("Standard_NV36adms_A10_v5", "eastus"): (4.52, 1.13),
    ("Standard_NV72ads_A10_v5", "eastus"): (6.52, 1.63),
    ("Standard_NV36ads_A10_v5", "southcentralus"): (3.84, 0.96),
    ("Standard_NV36adms_A10_v5", "southcentralus"): (5.424, 1.356),
    ("Standard_NV72ads_A10_v5", "southcentralus"): (7.824, 1.956),
    ("Standard_NC24ads_A100_v4", "eastus"): (3.673, 0.444433),
    ("Standard_NC48ads_A100_v4", "eastus"): (7.346, 0.888866),
    ("Standard_NC96ads_A100_v4", "eastus"): (14.692, 1.777732),
    ("Standard_NC24ads_A100_v4", "eastus2"): (3.673, 0.47749),
    ("Standard_NC48ads_A100_v4", "eastus2"): (7.346, 0.95498),
    ("Standard_NC96ads_A100_v4", "eastus2"): (14.692, 1.90996),
    ("Standard_NC24ads_A100_v4", "westus2"): (3.673, 0.615962),
    ("Standard_NC48ads_A100_v4", "westus2"): (7.346, 1.231924),
    ("Standard_NC96ads_A100_v4", "westus2"): (14.692, 2.463848),
    ("Standard_NC24ads_A100_v4", "westus3"): (3.673, 0.40403),
    ("Standard_NC48ads_A100_v4", "westus3"): (7.346, 0.80806),
    ("Standard_NC96ads_A100_v4", "westus3"): (14.692, 1.61612),
    ("Standard_NC24ads_A100_v4", "southcentralus"): (4.408, 0.57304),
    ("Standard_NC48ads_A100_v4", "southcentralus"): (8.815, 1.14595),
    ("Standard_NC96ads_A100_v4", "southcentralus"): (17.63, 2.2919),
    ("Standard_NC40ads_H100_v5", "eastus"): (6.98, None),
    ("Standard_NC80adis_H100_v5", "eastus"): (13.96, None),
    ("Standard_NC40ads_H100_v5", "eastus2"): (6.98, None),
    ("Standard_NC80adis_H100_v5", "eastus2"): (13.96, None),
    ("Standard_NC40ads_H100_v5", "westus3"): (6.98, None),
    ("Standard_NC80adis_H100_v5", "westus3"): (13.96, None),
    ("Standard_NC40ads_H100_v5", "southcentralus"): (8.38, None),
    ("Standard_NC80adis_H100_v5", "southcentralus"): (16.76, None),
    ("Standard_NCC40ads_H100_v5", "eastus2"): (6.98, 1.745),
    ("Standard_ND96asr_v4", "eastus"): (27.197, 2.99167),
    ("Standard_ND96asr_v4", "westus2"): (27.197, 2.99167),
    ("Standard_ND96asr_v4", "southcentralus"): (32.63, 3.5893),
    ("Standard_ND96amsr_A100_v4", "eastus"): (32.77, 3.6047),
    ("Standard_ND96amsr_A100_v4", "eastus2"): (32.77, 3.611254),
    ("Standard_ND96amsr_A100_v4", "southcentralus"): (39.324, 4.32564),
    ("Standard_ND96isr_H100_v5", "eastus"): (98.32, 18.169536),
    ("Standard_ND96isr_H100_v5", "eastus2"): (98.32, None),
    ("Standard_ND96isr_H200_v5", "westus3"): (84.80, None),
    ("Standard_ND128isr_NDR_GB200_v6", "westus3"): (108.16, None),
    ("Standard_NV4as_v4", "eastus"): (0.233, 0.02563),
    ("Standard_NV8as_v4", "eastus"): (0.466, 0.05126),
    ("Standard_NV16as_v4", "eastus"): (0.932, 0.10252),
    ("Standard_NV32as_v4", "eastus"): (1.864, 0.20504),
    ("Standard_NG8ads_V620_v1", "eastus2"): (0.908, 0.227),
    ("Standard_NG16ads_V620_v1", "eastus2"): (1.815, 0.45375),
    ("Standard_NG32ads_V620_v1", "eastus2"): (3.63, 0.9075),
    # Retail Prices API figures in a public "Pricing Mismatch Report" (generated 2026-09-01T21:38:32Z,
    # see README.md): the sizes it lists as on-demand with no Spot meter, at their first region.
    ("Standard_NC24ads_A100_v4", "jioindiacentral"): (5.142, None),
    ("Standard_NC48ads_A100_v4", "jioindiacentral"): (10.284, None),
    ("Standard_NC96ads_A100_v4", "jioindiacentral"): (20.569, None),
    ("Standard_NC40ads_H100_v5", "jioindiacentral"): (9.772, None),
    ("Standard_NC80adis_H100_v5", "jioindiacentral"): (19.544, None),
    ("Standard_NV6ads_A10_v5", "jioindiacentral"): (0.636, None),
    ("Standard_NV12ads_A10_v5", "jioindiacentral"): (1.271, None),
    ("Standard_NV18ads_A10_v5", "jioindiacentral"): (2.24, None),
    ("Standard_NV36ads_A10_v5", "jioindiacentral"): (4.48, None),
    ("Standard_NV36adms_A10_v5", "jioindiacentral"): (6.328, None),
    ("Standard_NV72ads_A10_v5", "jioindiacentral"): (9.128, None),
    ("Standard_NC6s_v3", "jioindiacentral"): (4.234, None),  # the report's region for NCv3 is jioindiawest
    ("Standard_NC12s_v3", "jioindiacentral"): (8.468, None),
    ("Standard_NC24rs_v3", "jioindiacentral"): (18.63, None),
    ("Standard_NC24s_v3", "brazilsouth"): (24.48, None),
    ("Standard_NC64as_T4_v3", "eastus2"): (4.352, 0.47872),
    ("Standard_NC32lds_xl_RTXPRO6000BSE_v6", "eastus2"): (1.243, None),
    ("Standard_NC64lds_xl_RTXPRO6000BSE_v6", "eastus"): (2.44, None),
    ("Standard_NC256lds_xl_RTXPRO6000BSE_v6", "westus2"): (11.00, None),
    ("Standard_NC256ds_xl_RTXPRO6000BSE_v6", "eastus2"): (12.76, None),
    ("Standard_NC132lds_xl_RTXPRO6000BSE_v6", "eastus2"): (5.50, None),
}
# The report lists every GPU size in the Jio regions as on-demand only.
NO_SPOT_REGIONS = {"jioindiacentral"}
# (size, region) pairs the report lists as having no Spot meter: none is recorded for them.
NO_SPOT_AT = {k for k, (_, spot) in REAL.items() if spot is None and k[1] in ("jioindiacentral", "brazilsouth")}
# Sizes with no real spot ratio at hand: spot = this share of on-demand (typical of the REAL pairs).
DEFAULT_SPOT_RATIO = {"T4": 0.11, "A100": 0.121, "V100": 0.2, "ND": 0.11}
NO_SPOT = {"Standard_NC40ads_H100_v5", "Standard_NC80adis_H100_v5", "Standard_ND128isr_NDR_GB200_v6",
           *(s for s in SIZES if "RTXPRO6000" in s)}
# Low Priority (Batch) meters in the recording: (size, region) -> (Linux price, Windows price)
LOW_PRIORITY = {
    ("Standard_ND96isr_H100_v5", "eastus"): (39.328, 41.094),  # Windows 41.094 REAL; Linux = 0.4 x 98.32
    ("Standard_NC24ads_A100_v4", "eastus"): (0.7346, 0.8450),
    ("Standard_NC24ads_A100_v4", "westus2"): (0.7346, 0.8450),
    ("Standard_ND96asr_v4", "eastus"): (5.4394, 6.3226),
    ("Standard_NC4as_T4_v3", "eastus"): (0.1052, 0.1236),
}
# Prices that differ from factor x eastus because a real price says so.
OVERRIDE_OD = {
    ("Standard_ND96isr_H100_v5", "westeurope"): 127.816,  # REAL Windows 132.232 minus 4.416 (see README)
    ("Standard_ND96isr_H200_v5", "eastus2"): 84.80,
    ("Standard_ND96isr_H200_v5", "swedencentral"): 110.24,
}


def _r(x: float) -> float:
    return float(f"{x:.6g}") if x < 1 else round(x, 4)


def vm_prices(sku: str, region: str) -> tuple[float, float | None]:
    _, _, _, _, od_eastus, ratio, _, _ = SIZES[sku]
    if (sku, region) in REAL:
        od, spot = REAL[(sku, region)]
        if (sku, region) in NO_SPOT_AT:
            return od, None
        if spot is None and sku not in NO_SPOT and ratio is not None:
            spot = _r(od * ratio)
        return od, spot
    factor = REGIONS[region][1]
    od = OVERRIDE_OD.get((sku, region), round(od_eastus * factor, 4))
    if sku in NO_SPOT or region in NO_SPOT_REGIONS:
        return od, None
    if ratio is None:
        kind = "T4" if "_T4_" in sku else "A100" if "A100" in sku else "V100" if sku.endswith("s_v3") else "ND"
        ratio = DEFAULT_SPOT_RATIO[kind]
    return od, _r(od * ratio)


def vm_item(sku: str, region: str, option: str, windows: bool, price: float, legacy_product: str | None = None
            ) -> dict:
    base, product, _, vcpus, _, _, start, savings = SIZES[sku]
    location = REGIONS[region][0]
    meter = base + {"on_demand": "", "spot": " Spot", "low_priority": " Low Priority"}[option]
    product_name = legacy_product or product
    if windows:
        product_name = product.removesuffix(" Linux") + " Windows"
    product_id = "DZH318Z0" + _h(product_name)
    eff = start if option == "on_demand" else "2026-11-01"
    item = {
        "currencyCode": "USD",
        "tierMinimumUnits": 0.0,
        "retailPrice": price,
        "unitPrice": price,
        "armRegionName": region,
        "location": location,
        "effectiveStartDate": f"{eff if not legacy_product else '2021-06-01'}T00:00:00Z",
        "meterId": _meter_id(region, meter, product_name),
        "meterName": meter,
        "productId": product_id,
        "skuId": f"{product_id}/{_h(region, meter, product_name, n=4)}",
        "productName": product_name,
        "skuName": meter,
        "serviceName": "Virtual Machines",
        "serviceId": VM_SERVICE_ID,
        "serviceFamily": "Compute",
        "unitOfMeasure": "1 Hour",
        "type": "Consumption",
        "isPrimaryMeterRegion": True,
        "armSkuName": sku,
    }
    if savings and option == "on_demand" and not windows and not legacy_product:
        item["savingsPlan"] = [
            {"unitPrice": _r(price * 0.4443), "retailPrice": _r(price * 0.4443), "term": "3 Years"},
            {"unitPrice": _r(price * 0.6534), "retailPrice": _r(price * 0.6534), "term": "1 Year"},
        ]
    return item


# Reserved VM instances in eastus, as (effective hourly rate / pay-as-you-go) per term in years:
# SYNTHETIC shares (no published reservation price of these sizes was at hand); the item's price is
# the whole term's, pay-as-you-go x share x 8760 h x years, as the API states reservations.
RESERVATIONS = {
    ("Standard_ND96isr_H100_v5", "eastus"): {1: 0.62, 3: 0.41},
    ("Standard_NC24ads_A100_v4", "eastus"): {1: 0.63, 3: 0.40},
    ("Standard_ND96asr_v4", "eastus"): {1: 0.63, 3: 0.40},
}


def reservation_item(sku: str, region: str, term: str, term_price: float) -> dict:
    """A Reservation item: the Linux meter's fields, type Reservation, the term's whole price."""
    item = vm_item(sku, region, "on_demand", False, term_price)
    item.pop("savingsPlan", None)
    item["meterId"] = _meter_id(region, item["meterName"], item["productName"], term)
    item["skuId"] = f"{item['productId']}/{_h(region, item['meterName'], term, n=4)}"
    item["effectiveStartDate"] = "2026-10-01T00:00:00Z"
    item["type"] = "Reservation"
    item["reservationTerm"] = term
    return item


def vm_items() -> list[dict]:
    items = []
    for sku, regions in WHERE.items():
        _, _, has_windows_meter, vcpus, *_ = SIZES[sku]
        for region in regions:
            has_windows = has_windows_meter and region in FIRST_REGIONS
            od, spot = vm_prices(sku, region)
            windows_od = 102.736 if (sku, region) == ("Standard_ND96isr_H100_v5", "eastus") else round(
                od + WINDOWS_PER_VCPU * vcpus, 4)
            items.append(vm_item(sku, region, "on_demand", False, od))
            if has_windows:
                items.append(vm_item(sku, region, "on_demand", True, windows_od))
            if spot is not None:
                items.append(vm_item(sku, region, "spot", False, spot))
                if has_windows:
                    items.append(vm_item(sku, region, "spot", True, _r(spot + WINDOWS_PER_VCPU * vcpus * 0.2)))
            if (sku, region) in LOW_PRIORITY:
                lp_linux, lp_windows = LOW_PRIORITY[(sku, region)]
                items.append(vm_item(sku, region, "low_priority", False, lp_linux))
                items.append(vm_item(sku, region, "low_priority", True, lp_windows))
    for (sku, region), shares in RESERVATIONS.items():
        od, _ = vm_prices(sku, region)
        for term, years in (("1 Year", 1), ("3 Years", 3)):
            items.append(reservation_item(sku, region, term, round(od * shares[years] * 8760 * years, 2)))
    # The same NDm rate under its legacy product name (older effectiveStartDate): the
    # adapter must keep exactly one offer.
    items.append(vm_item("Standard_ND96amsr_A100_v4", "eastus", "on_demand", False, 32.77,
                         legacy_product="Virtual Machines NDamsr A100 v4 Series"))
    # The API lists items in no particular order; a stable shuffle spreads one size's
    # Linux, Windows and Spot meters over different pages.
    return sorted(items, key=lambda i: i["meterId"])


# -- storage and bandwidth ------------------------------------------------------------------------

STORAGE_FACTOR = {"eastus": 1.0, "eastus2": 1.0, "westus2": 1.0, "westus3": 1.0, "southcentralus": 1.1,
                  "northeurope": 1.1, "westeurope": 1.1, "swedencentral": 1.1, "japaneast": 1.25,
                  "southeastasia": 1.15}


# Monthly price per disk in the US regions, USD, by meter. REAL: P4 5.28, P10 19.71, P20 73.22,
# P30 135.17, E30 76.80 (README "Disks"); every other tier is SYNTHETIC (README).
DISK_TIERS = {
    "Premium SSD Managed Disks": ("P", "Premium_SSD_Managed_Disk", "2018-05-01", {
        "1": 0.77, "2": 1.54, "3": 3.08, "4": 5.28, "6": 10.21, "10": 19.71, "15": 38.02, "20": 73.22,
        "30": 135.17, "40": 259.05, "50": 495.57, "60": 946.08, "70": 1802.15, "80": 3604.30}),
    "Standard SSD Managed Disks": ("E", "StandardSSD_Managed_Disk", "2019-04-01", {
        "1": 0.30, "2": 0.60, "3": 1.20, "4": 2.40, "6": 4.80, "10": 9.60, "15": 19.20, "20": 38.40,
        "30": 76.80, "40": 153.60, "50": 307.20, "60": 614.40, "70": 1228.80, "80": 2457.60}),
    "Standard HDD Managed Disks": ("S", "Standard_HDD_Managed_Disk", "2017-04-01", {
        "4": 1.54, "6": 3.01, "10": 5.89, "15": 11.33, "20": 21.76, "30": 40.96, "40": 81.92, "50": 163.84,
        "60": 327.68, "70": 655.36, "80": 1310.72}),
}
# Every tier in these regions; the others carry P30 and E30 only, to keep the recording small.
ALL_TIER_REGIONS = {"eastus", "eastus2", "westus2", "westeurope", "japaneast"}


def storage_items() -> list[dict]:
    items = []
    for region, (location, _) in REGIONS.items():
        # Added regions: synthetic, the region's VM factor capped at 1.3.
        f = STORAGE_FACTOR.get(region, min(1.3, REGIONS[region][1]))
        meters = []
        for product, (letter, arm_prefix, start, prices) in DISK_TIERS.items():
            for tier, price in prices.items():
                if region in ALL_TIER_REGIONS or (letter in "PE" and tier == "30"):
                    meters.append((product, f"{letter}{tier} LRS", f"{letter}{tier} LRS Disk", "1/Month",
                                   round(price * f, 2), start, f"{arm_prefix}_{letter}{tier}"))
        meters.append(("Azure Premium SSD v2", "Premium LRS", "Premium LRS Provisioned Capacity", "1 GiB/Hour",
                       _r(0.000110 * f), "2023-06-01", ""))
        for product, sku, meter, unit, price, start, arm_sku in meters:
            product_id = "DZH318Z0" + _h(product)
            items.append({
                "currencyCode": "USD", "tierMinimumUnits": 0.0, "retailPrice": price, "unitPrice": price,
                "armRegionName": region, "location": location, "effectiveStartDate": f"{start}T00:00:00Z",
                "meterId": _meter_id(region, meter, product), "meterName": meter, "productId": product_id,
                "skuId": f"{product_id}/{_h(region, sku)}", "productName": product, "skuName": sku,
                "serviceName": "Storage", "serviceId": STORAGE_SERVICE_ID, "serviceFamily": "Storage",
                "unitOfMeasure": unit, "type": "Consumption", "isPrimaryMeterRegion": True,
                "armSkuName": arm_sku,
            })
    return sorted(items, key=lambda i: i["meterId"])


ASIA = {"japaneast", "southeastasia", "japanwest", "koreacentral", "centralindia", "southindia",
        "jioindiacentral", "eastasia", "australiaeast", "australiasoutheast"}
# Zone 3 (South America, Africa, Middle East) is billed at the Asia rates here: synthetic.
ASIA |= {"brazilsouth", "southafricanorth", "uaenorth", "qatarcentral"}
# Tier starts in GB: first 100 GB free, next 10 TB, next 40 TB, next 100 TB, next 350 TB.
INTERNET_TIERS = (0.0, 100.0, 10340.0, 51300.0, 153700.0)
INTERNET_PRICES = {"zone1": (0.0, 0.087, 0.083, 0.07, 0.05), "zone2": (0.0, 0.12, 0.085, 0.082, 0.08)}


def bandwidth_items() -> list[dict]:
    items = []
    for region, (location, _) in REGIONS.items():
        zone = "zone2" if region in ASIA else "zone1"
        base = dict(currencyCode="USD", armRegionName=region, location=location, serviceName="Bandwidth",
                    serviceId=BANDWIDTH_SERVICE_ID, serviceFamily="Networking", unitOfMeasure="1 GB",
                    type="Consumption", isPrimaryMeterRegion=True, armSkuName="")
        product_id = "DZH318Z0" + _h("Rtn Preference: MGN")
        for start, price in zip(INTERNET_TIERS, INTERNET_PRICES[zone]):
            items.append({**base, "tierMinimumUnits": start, "retailPrice": price, "unitPrice": price,
                          "effectiveStartDate": "2023-07-01T00:00:00Z",
                          "meterId": _meter_id(region, "Standard Data Transfer Out"),
                          "meterName": "Standard Data Transfer Out", "productId": product_id,
                          "skuId": f"{product_id}/{_h(region, 'MGN')}", "productName": "Rtn Preference: MGN",
                          "skuName": "Standard"})
        inter_id = "DZH318Z0BNZ4"  # REAL productId prefix of "Bandwidth Inter-Region" (FOCUS SkuPriceId)
        intra_price, inter_meter, inter_price = (
            (0.08, "Inter Continent Data Transfer Out - ASIA To Any", 0.08) if region in ASIA
            else (0.02, "Inter Continent Data Transfer Out - NAM or EU To Any", 0.05))
        for sku, meter, price in (("Intra Continent", "Intra Continent Data Transfer Out", intra_price),
                                  ("Inter Continent", inter_meter, inter_price)):
            items.append({**base, "tierMinimumUnits": 0.0, "retailPrice": price, "unitPrice": price,
                          "effectiveStartDate": "2024-02-01T00:00:00Z", "meterId": _meter_id(region, meter),
                          "meterName": meter, "productId": inter_id, "skuId": f"{inter_id}/{_h(region, meter)}",
                          "productName": "Bandwidth Inter-Region", "skuName": sku})
    for it in items:  # the API's key order
        order = ["currencyCode", "tierMinimumUnits", "retailPrice", "unitPrice", "armRegionName", "location",
                 "effectiveStartDate", "meterId", "meterName", "productId", "skuId", "productName", "skuName",
                 "serviceName", "serviceId", "serviceFamily", "unitOfMeasure", "type", "isPrimaryMeterRegion",
                 "armSkuName"]
        it_sorted = {k: it[k] for k in order}
        it.clear()
        it.update(it_sorted)
    return sorted(items, key=lambda i: (i["meterId"], i["tierMinimumUnits"]))


# -- pages and manifest -----------------------------------------------------------------------------

def page_link(odata_filter: str, skip: int) -> str:
    query = (f"currencyCode=%27USD%27&api-version={API_VERSION}&meterRegion=%27primary%27"
             f"&$filter={quote(odata_filter, safe='')}&$skip={skip}")
    return f"https://{PRICES_HOST}:443{PRICES_PATH}?{query}"


def dump_page(items: list[dict], next_link: str | None) -> str:
    """The API's envelope, one item per line (valid JSON, easy to grep and diff)."""
    lines = ",\n    ".join(json.dumps(i, ensure_ascii=False) for i in items)
    return (
        '{\n  "BillingCurrency": "USD",\n  "CustomerEntityId": "Default",\n  "CustomerEntityType": "Retail",\n'
        f'  "Items": [\n    {lines}\n  ],\n  "NextPageLink": {json.dumps(next_link)},\n  "Count": {len(items)}\n}}\n'
    )


def params(odata_filter: str, skip: int | None) -> dict:
    return {"api-version": API_VERSION, "currencyCode": "'USD'", "meterRegion": "'primary'",
            "$filter": odata_filter, "$skip": None if skip is None else str(skip)}


def write_query(folder: str, odata_filter: str, items: list[dict], exchanges: list[dict]) -> int:
    pages = [items[i:i + PAGE_SIZE] for i in range(0, len(items), PAGE_SIZE)] or [[]]
    (HERE / folder).mkdir(exist_ok=True)
    for n, chunk in enumerate(pages):
        skip = n * PAGE_SIZE
        nxt = page_link(odata_filter, skip + PAGE_SIZE) if n + 1 < len(pages) else None
        rel = f"{folder}/page-{n + 1:02d}.json"
        (HERE / rel).write_text(dump_page(chunk, nxt))
        exchanges.append({
            "host": PRICES_HOST, "method": "GET", "path": PRICES_PATH,
            "match": {"params": params(odata_filter, skip if n else None)},
            "response": {"status": 200, "headers": {"Content-Type": "application/json; charset=utf-8"},
                         "body_file": rel},
        })
    return len(pages)


# -- spot eviction rates (Azure Resource Graph) ----------------------------------------------------

# SYNTHETIC eviction-rate bands (Resource Graph answers only a signed-in identity; no real answer
# is at hand): (size, region) -> `properties.evictionRate`. Two pairs match no spot offer of the
# price pages (NC6s_v3 qatarcentral, ND96isr_H200_v5 eastus): the adapter must ignore them.
EVICTION_RATES = {
    ("Standard_NC24ads_A100_v4", "eastus"): "5-10",
    ("Standard_NC24ads_A100_v4", "westeurope"): "0-5",
    ("Standard_NC4as_T4_v3", "eastus"): "0-5",
    ("Standard_NC4as_T4_v3", "westus2"): "10-15",
    ("Standard_NC6s_v3", "qatarcentral"): "5-10",
    ("Standard_ND96amsr_A100_v4", "eastus"): "15-20",
    ("Standard_ND96isr_H100_v5", "eastus"): "0-5",
    ("Standard_ND96isr_H100_v5", "westus3"): "20+",
    ("Standard_ND96isr_H200_v5", "eastus"): "15-20",
    ("Standard_NV36ads_A10_v5", "eastus"): "5-10",
    ("Standard_NV36ads_A10_v5", "southcentralus"): "10-15",
}
EVICTION_PAGE_ROWS = 7  # the live service pages at up to 1,000 rows ($top); 7 gives two pages here
EVICTION_SKIP_TOKEN = "eyIkaWQiOiIxIiwiTWF4Um93cyI6NywiUm93c1RvU2tpcCI6N30="  # opaque to the client; synthetic


def write_eviction_rates(exchanges: list[dict]) -> int:
    rows = [{"skuName": sku, "location": region, "evictionRate": rate}
            for (sku, region), rate in sorted(EVICTION_RATES.items())]  # the query's `order by`
    pages = [rows[:EVICTION_PAGE_ROWS], rows[EVICTION_PAGE_ROWS:]]
    (HERE / "resource-graph").mkdir(exist_ok=True)
    for n, chunk in enumerate(pages):
        doc: dict = {"totalRecords": len(rows), "count": len(chunk), "data": chunk, "facets": [],
                     "resultTruncated": "false"}
        if n == 0:
            doc["$skipToken"] = EVICTION_SKIP_TOKEN
        rel = f"resource-graph/page-{n + 1:02d}.json"
        (HERE / rel).write_text(json.dumps(doc, indent=1) + "\n")
        exchanges.append({
            "host": RESOURCE_GRAPH_HOST, "method": "POST", "path": RESOURCE_GRAPH_PATH,
            "match": {"params": {"api-version": RESOURCE_GRAPH_API_VERSION},
                      "json": {"query": QUERY, "options": {"$skipToken": EVICTION_SKIP_TOKEN if n else None}}},
            "response": {"status": 200, "headers": {"Content-Type": "application/json; charset=utf-8"},
                         "body_file": rel},
        })
    return len(pages)


def main() -> None:
    exchanges: list[dict] = []
    counts = {
        "vm": write_query("vm", VM_FILTER, vm_items(), exchanges),
        "storage": write_query("storage", STORAGE_FILTER, storage_items(), exchanges),
        "bandwidth": write_query("bandwidth", BANDWIDTH_FILTER, bandwidth_items(), exchanges),
        "resource-graph": write_eviction_rates(exchanges),
    }
    manifest = {"provider": "azure", "recorded_at": "2026-11-30T03:00:00Z",
                "settings": {}, "exchanges": exchanges}
    (HERE / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    print("pages written:", counts)


if __name__ == "__main__":
    main()
