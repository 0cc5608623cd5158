#!/usr/bin/env python3
"""Build the AWS replay recordings in ``adapters/recordings/aws/`` from one facts table.

Run from the repository root (or anywhere)::

    python tools/build_aws_recordings.py            # regenerate + verify
    python tools/build_aws_recordings.py --check    # verify what is on disk

The script is deterministic: there is no randomness, every "varying" value (SKUs, rate codes,
NextTokens, request ids, spot prices per AZ, timestamps) is derived from a SHA-256 hash of a
stable key, and gzip members are written with mtime=0.  Rerunning it produces byte-identical
files.

What it writes (see ``adapters/recordings/aws/README.md`` for provenance):

* ``manifest.json``                                  the exchanges, format of docs/recordings.md
* ``bulk/AmazonEC2/region_index.json``                bulk price list region index (28 regions)
* ``bulk/AmazonEC2/<region>/index.csv.gz``            bulk offer file, CSV form, 91 columns
* ``bulk/AWSDataTransfer/region_index.json``          same for AWS Data Transfer (the 8 full regions)
* ``bulk/AWSDataTransfer/<region>/index.csv.gz``      AWS Data Transfer offer file, 24 columns
* ``pricing/<region>/{gpu,storage,transfer}.<n>.json[.gz]``  Pricing API GetProducts pages
* ``ec2/<region>/<Operation>.<n>.xml[.gz]``          EC2 Query API pages
* ``spot-advisor/spot-advisor-data.json``             Spot Instance Advisor feed

Every body is verified after writing: CSVs with the csv module (column count of every row,
quoting convention), EC2 XML and Pricing JSON bodies by parsing them with botocore's own
parsers and comparing with the source dict they were serialized from.

Everything below ``# ==== FACTS`` is data; everything below ``# ==== BUILD`` is mechanics.
"""
from __future__ import annotations

import argparse
import base64
import csv
import datetime as dt
import gzip
import hashlib
import io
import json
import math
import shutil
import sys
from pathlib import Path
from xml.sax.saxutils import escape as xml_escape

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "adapters" / "recordings" / "aws"

# =====================================================================================
# ==== FACTS
# =====================================================================================

RECORDED_AT = "2026-11-30T03:00:00Z"

# Bulk price list versions (publication of the offer files we pretend to have fetched).
EC2_VERSION = "20261125173012"
EC2_PUBLICATION = "2026-11-25T17:30:12Z"
DT_VERSION = "20261118004117"
DT_PUBLICATION = "2026-11-18T00:41:17Z"
OD_EFFECTIVE = "2026-11-01"          # CSV EffectiveDate of OnDemand rows (sample: 1st of month)
RI_EFFECTIVE = "2026-11-25"          # CSV EffectiveDate of Reserved rows (sample: publication day)
JSON_EFFECTIVE = "2026-11-01T00:00:00Z"
DISCLAIMER = (
    "This pricing list is for informational purposes only. All prices are subject to the "
    "additional terms included in the pricing pages on http://aws.amazon.com. All Free Tier "
    "prices are also subject to the terms included at https://aws.amazon.com/free/"
)

# Region order used by every price tuple below.
REGION_ORDER = ["us-east-1", "us-east-2", "us-west-2", "eu-west-1", "eu-central-1",
                "ap-northeast-1", "ap-southeast-1", "ap-south-1"]

# name, usage-type prefix (EC2 / EBS), data-transfer code, AZs (name, zone id).
# AZ names as of 2026; name->id mappings are per-account in reality, these are one plausible
# account's.  us-east-1e (use1-az3) is the constrained legacy zone: real 2026 offerings list
# only ~58 instance types there (moto instance_type_offerings/az us-east-1).
REGIONS = {
    "us-east-1": dict(name="US East (N. Virginia)", prefix="", dt="USE1", legacy={"us-east-1e"},
                      azs=[("us-east-1a", "use1-az6"), ("us-east-1b", "use1-az1"),
                           ("us-east-1c", "use1-az2"), ("us-east-1d", "use1-az4"),
                           ("us-east-1e", "use1-az3"), ("us-east-1f", "use1-az5")]),
    "us-east-2": dict(name="US East (Ohio)", prefix="USE2-", dt="USE2", legacy=set(),
                      azs=[("us-east-2a", "use2-az1"), ("us-east-2b", "use2-az2"),
                           ("us-east-2c", "use2-az3")]),
    "us-west-2": dict(name="US West (Oregon)", prefix="USW2-", dt="USW2", legacy=set(),
                      azs=[("us-west-2a", "usw2-az2"), ("us-west-2b", "usw2-az1"),
                           ("us-west-2c", "usw2-az3"), ("us-west-2d", "usw2-az4")]),
    "eu-west-1": dict(name="EU (Ireland)", prefix="EU-", dt="EU", legacy=set(),
                      azs=[("eu-west-1a", "euw1-az3"), ("eu-west-1b", "euw1-az1"),
                           ("eu-west-1c", "euw1-az2")]),
    "eu-central-1": dict(name="EU (Frankfurt)", prefix="EUC1-", dt="EUC1", legacy=set(),
                         azs=[("eu-central-1a", "euc1-az2"), ("eu-central-1b", "euc1-az3"),
                              ("eu-central-1c", "euc1-az1")]),
    "ap-northeast-1": dict(name="Asia Pacific (Tokyo)", prefix="APN1-", dt="APN1", legacy=set(),
                           azs=[("ap-northeast-1a", "apne1-az4"), ("ap-northeast-1c", "apne1-az1"),
                                ("ap-northeast-1d", "apne1-az2")]),
    "ap-southeast-1": dict(name="Asia Pacific (Singapore)", prefix="APS1-", dt="APS1", legacy=set(),
                           azs=[("ap-southeast-1a", "apse1-az2"), ("ap-southeast-1b", "apse1-az1"),
                                ("ap-southeast-1c", "apse1-az3")]),
    "ap-south-1": dict(name="Asia Pacific (Mumbai)", prefix="APS3-", dt="APS3", legacy=set(),
                       azs=[("ap-south-1a", "aps1-az1"), ("ap-south-1b", "aps1-az3"),
                            ("ap-south-1c", "aps1-az2")]),
}
# The other commercial regions whose public price data (OD_MORE_REGIONS) lists a GPU type of
# FAMILIES.  They carry GPU rows only: no EBS, CPU-only or data-transfer products (see README).
# Location names are the price list's; AZ letters and zone ids are one plausible account's.
MORE_REGIONS = {
    "af-south-1": dict(name="Africa (Cape Town)", prefix="AFS1-", n_az=3, id="afs1"),
    "ap-east-1": dict(name="Asia Pacific (Hong Kong)", prefix="APE1-", n_az=3, id="ape1"),
    "ap-northeast-2": dict(name="Asia Pacific (Seoul)", prefix="APN2-", n_az=4, id="apne2"),
    "ap-northeast-3": dict(name="Asia Pacific (Osaka)", prefix="APN3-", n_az=3, id="apne3"),
    "ap-south-2": dict(name="Asia Pacific (Hyderabad)", prefix="APS5-", n_az=3, id="aps2"),
    "ap-southeast-2": dict(name="Asia Pacific (Sydney)", prefix="APS2-", n_az=3, id="apse2"),
    "ap-southeast-3": dict(name="Asia Pacific (Jakarta)", prefix="APS4-", n_az=3, id="apse3"),
    "ap-southeast-5": dict(name="Asia Pacific (Malaysia)", prefix="APS7-", n_az=3, id="apse5"),
    "ca-central-1": dict(name="Canada (Central)", prefix="CAN1-", n_az=3, id="cac1"),
    "eu-central-2": dict(name="EU (Zurich)", prefix="EUC2-", n_az=3, id="euc2"),
    "eu-north-1": dict(name="EU (Stockholm)", prefix="EUN1-", n_az=3, id="eun1"),
    "eu-south-1": dict(name="EU (Milan)", prefix="EUS1-", n_az=3, id="eus1"),
    "eu-south-2": dict(name="EU (Spain)", prefix="EUS2-", n_az=3, id="eus2"),
    "eu-west-2": dict(name="EU (London)", prefix="EUW2-", n_az=3, id="euw2"),
    "eu-west-3": dict(name="EU (Paris)", prefix="EUW3-", n_az=3, id="euw3"),
    "il-central-1": dict(name="Israel (Tel Aviv)", prefix="ILC1-", n_az=3, id="ilc1"),
    "me-central-1": dict(name="Middle East (UAE)", prefix="MEC1-", n_az=3, id="mec1"),
    "me-south-1": dict(name="Middle East (Bahrain)", prefix="MES1-", n_az=3, id="mes1"),
    "sa-east-1": dict(name="South America (Sao Paulo)", prefix="SAE1-", n_az=3, id="sae1"),
    "us-west-1": dict(name="US West (N. California)", prefix="USW1-", n_az=2, id="usw1"),
}
for _code, _m in MORE_REGIONS.items():
    _letters = "ac" if _m["n_az"] == 2 else "abcd"[:_m["n_az"]]
    _ids = [1, 3] if _m["n_az"] == 2 else list(range(1, _m["n_az"] + 1))
    REGIONS[_code] = dict(name=_m["name"], prefix=_m["prefix"], dt=_m["prefix"].rstrip("-"),
                          legacy=set(), azs=[(f"{_code}{c}", f"{_m['id']}-az{i}")
                                             for c, i in zip(_letters, _ids)])
ALL_REGIONS = REGION_ORDER + sorted(MORE_REGIONS)
# Regions a new account must opt into (AWS docs, "Enable or disable AWS Regions in your account").
OPT_IN_REGIONS = {"af-south-1", "ap-east-1", "ap-south-2", "ap-southeast-3", "ap-southeast-5",
                  "eu-central-2", "eu-south-1", "eu-south-2", "il-central-1", "me-central-1",
                  "me-south-1"}
# Regions EC2's DescribeRegions lists that the account has not opted into (not recorded).
NOT_OPTED_IN = ["ap-southeast-4", "ap-southeast-7", "ca-west-1", "mx-central-1"]

# Regions that appear only as inter-region egress destinations (not recorded themselves).
EXTRA_DT_REGIONS = {"ca-central-1": ("Canada (Central)", "CAN1"),
                    "eu-west-2": ("EU (London)", "EUW2"),
                    "sa-east-1": ("South America (Sao Paulo)", "SAE1")}

# ---- GPU families: DescribeInstanceTypes family-level fields + pricing-attribute strings ----
# gpu = (Name, Manufacturer, MiB per GPU, workloads); total = how TotalGpuMemoryInMiB is formed:
#   "sum"  -> count * MiB per GPU (as in moto's real 2026 records, e.g. g5.12xlarge 91552)
#   "part" -> the partition's own MiB (fractional g6f)
# (aws-cli issue #8970: in 2024 the API briefly reported the L4/L40S *total* as the per-GPU
#  MemoryInfo, e.g. g6.48xlarge 183105 per GPU; fixed since -- not reproduced here.)
# cpu = (manufacturer, architecture, sustained GHz); pp = pricing physicalProcessor,
# clock = pricing clockSpeed, feat = processorFeatures, intel = AVX/Turbo "Yes"/"No".
FAMILIES = {
    "g4dn": dict(gpu=("T4", "NVIDIA", 16384, ["graphics", "ml-ai"]), gb=16, total="sum",
                 cpu=("Intel", "x86_64", 2.5), hyper="nitro", tpm=True, enclaves="supported",
                 boot=["legacy-bios", "uefi"], dh=False, ar=False, rm="unsupported", tpc=[1, 2],
                 vc="even", eit=True, ena="required", usage=["on-demand", "spot"],
                 pp="Intel Xeon Family", clock="2.5 GHz", intel=True,
                 feat="Intel AVX; Intel AVX2; Intel AVX512; Intel Turbo", spot=0.38),
    "g4ad": dict(gpu=("Radeon Pro V520", "AMD", 8192, ["graphics", "ml-ai"]), gb=8, total="sum",
                 cpu=("AMD", "x86_64", 3.0), hyper="nitro", tpm=False, enclaves="unsupported",
                 boot=["legacy-bios"], dh=True, ar=False, rm="unsupported", tpc=[1, 2], vc="pow2",
                 eit=True, ena="required", usage=["on-demand", "spot"],
                 pp="AMD EPYC 7R32", clock="3.3 GHz", intel=False, feat="AMD Turbo; AVX; AVX2",
                 spot=0.40),
    "g5": dict(gpu=("A10G", "NVIDIA", 22888, ["graphics", "ml-ai"]), gb=24, total="sum",
               cpu=("AMD", "x86_64", 3.3), hyper="nitro", tpm=True, enclaves="supported",
               boot=["legacy-bios", "uefi"], dh=False, ar=False, rm="unsupported", tpc=None, vc=None,
               eit=True, ena="required", usage=["on-demand", "spot"],
               # moto's records (generated from the real API) report CurrentGeneration false for g5.
               current=False,
               pp="AMD EPYC 7R32", clock="2.8 GHz", intel=False, feat="AMD Turbo; AVX; AVX2",
               spot=0.42),
    "g5g": dict(gpu=("T4g", "NVIDIA", 16384, ["graphics", "ml-ai"]), gb=16, total="sum",
                cpu=("AWS", "arm64", 2.5), hyper="nitro", tpm=False, enclaves="unsupported",
                boot=["uefi"], dh=False, ar=True, rm="supported", tpc=[1], vc="all", eit=False,
                ena="required", usage=["on-demand", "spot"],
                pp="AWS Graviton2 Processor", clock="2.5 GHz", intel=False, feat="", spot=0.35),
    "g6": dict(gpu=("L4", "NVIDIA", 22888, ["graphics", "ml-ai"]), gb=24, total="sum",
               cpu=("AMD", "x86_64", 3.4), hyper="nitro", tpm=True, enclaves="supported",
               boot=["legacy-bios", "uefi"], dh=False, ar=False, rm="unsupported", tpc=[1, 2],
               vc="even", eit=True, ena="required", usage=["on-demand", "spot"],
               pp="AMD EPYC 7R13 Processor", clock="3.95 GHz", intel=False,
               feat="AMD Turbo; AVX; AVX2", spot=0.45),
    "gr6": dict(gpu=("L4", "NVIDIA", 22888, ["graphics", "ml-ai"]), gb=24, total="sum",
                cpu=("AMD", "x86_64", 3.4), hyper="nitro", tpm=True, enclaves="supported",
                boot=["legacy-bios", "uefi"], dh=False, ar=False, rm="unsupported", tpc=[1, 2],
                vc="even", eit=True, ena="required", usage=["on-demand", "spot"],
                pp="AMD EPYC 7R13 Processor", clock="3.95 GHz", intel=False,
                feat="AMD Turbo; AVX; AVX2", spot=0.44),
    # Fractional L4: the API reports Count 0, LogicalGpuCount 1, GpuPartitionSize 1/8..1/2 and
    # the partition's memory (g6f.large 2861 MiB) -- aws-cli issue #9659, karpenter PRs 8913/9322.
    "g6f": dict(gpu=("L4", "NVIDIA", 22888, ["graphics", "ml-ai"]), gb=24, total="part",
                cpu=("AMD", "x86_64", 3.4), hyper="nitro", tpm=True, enclaves="supported",
                boot=["legacy-bios", "uefi"], dh=False, ar=False, rm="unsupported", tpc=[1, 2],
                vc="even", eit=True, ena="required", usage=["on-demand", "spot"],
                pp="AMD EPYC 7R13 Processor", clock="3.95 GHz", intel=False,
                feat="AMD Turbo; AVX; AVX2", spot=0.50),
    "g6e": dict(gpu=("L40S", "NVIDIA", 45776, ["graphics", "ml-ai"]), gb=48, total="sum",
                cpu=("AMD", "x86_64", 3.4), hyper="nitro", tpm=True, enclaves="supported",
                boot=["legacy-bios", "uefi"], dh=False, ar=False, rm="unsupported", tpc=[1, 2],
                vc="even", eit=True, ena="required", usage=["on-demand", "spot"],
                pp="AMD EPYC 7R13 Processor", clock="3.95 GHz", intel=False,
                feat="AMD Turbo; AVX; AVX2", spot=0.40),
    # g7e: GPU name as DescribeInstanceTypes spells it ("RTX PRO Server 6000"); 98304 MiB per GPU
    # is NOT verified against a real response (see README).
    "g7e": dict(gpu=("RTX PRO Server 6000", "NVIDIA", 98304, ["graphics", "ml-ai"]), gb=96,
                total="sum", cpu=("Intel", "x86_64", 3.2), hyper="nitro", tpm=True,
                enclaves="supported", boot=["legacy-bios", "uefi"], dh=False, ar=False,
                rm="unsupported", tpc=[1, 2], vc="even", eit=True, ena="required",
                usage=["on-demand", "spot"], pp="Intel Xeon Scalable (Emerald Rapids)",
                clock="3.2 GHz", intel=True,
                feat="Intel AVX; Intel AVX2; Intel AVX512; Intel AMX; Intel Turbo", spot=0.58),
    "p3": dict(gpu=("V100", "NVIDIA", 16384, ["ml-ai"]), gb=16, total="sum",
               cpu=("Intel", "x86_64", 2.7), hyper="xen", tpm=False, enclaves="unsupported",
               boot=["legacy-bios"], dh=True, ar=True, rm="unsupported", tpc=[1, 2], vc="even",
               eit=False, ena="supported", usage=["on-demand", "spot"],
               pp="Intel Xeon E5-2686 v4 (Broadwell)", clock="2.3 GHz", intel=True,
               feat="Intel AVX; Intel AVX2; Intel Turbo", spot=0.32),
    "p3dn": dict(gpu=("V100", "NVIDIA", 32768, ["ml-ai"]), gb=32, total="sum",
                 cpu=("Intel", "x86_64", 2.5), hyper="nitro", tpm=False, enclaves="supported",
                 boot=["legacy-bios", "uefi"], dh=True, ar=False, rm="unsupported", tpc=[1, 2],
                 vc="p3dn", eit=True, ena="required", usage=["on-demand", "spot"],
                 pp="Intel Xeon Platinum 8175 (Skylake)", clock="2.5 GHz", intel=True,
                 feat="Intel AVX; Intel AVX2; Intel AVX512; Intel Turbo", spot=0.35),
    "p4d": dict(gpu=("A100", "NVIDIA", 40960, ["ml-ai"]), gb=40, total="sum",
                cpu=("Intel", "x86_64", 3.0), hyper="nitro", tpm=False, enclaves="supported",
                boot=["legacy-bios"], dh=True, ar=False, rm="unsupported", tpc=[1, 2], vc="even",
                eit=True, ena="required", usage=["capacity-block", "on-demand", "spot"],
                pp="Intel Xeon Platinum 8275L", clock="3 GHz", intel=True,
                feat="Intel AVX; Intel AVX2; Intel AVX512; Intel Deep Learning Boost; Intel Turbo",
                spot=0.45),
    "p4de": dict(gpu=("A100", "NVIDIA", 81920, ["ml-ai"]), gb=80, total="sum",
                 cpu=("Intel", "x86_64", 3.0), hyper="nitro", tpm=False, enclaves="supported",
                 boot=["legacy-bios"], dh=True, ar=False, rm="unsupported", tpc=[1, 2], vc="even",
                 eit=True, ena="required", usage=["capacity-block", "on-demand", "spot"],
                 pp="Intel Xeon Platinum 8275L", clock="3 GHz", intel=True,
                 feat="Intel AVX; Intel AVX2; Intel AVX512; Intel Deep Learning Boost; Intel Turbo",
                 spot=0.50),
    # p5.4xlarge: Karpenter's generated reference (from DescribeInstanceTypes) shows gpu-count 0
    # for p5.4xlarge, i.e. the API reports Count 0 like the fractional g6f; see SIZES.
    "p5": dict(gpu=("H100", "NVIDIA", 81920, ["ml-ai"]), gb=80, total="sum",
               cpu=("AMD", "x86_64", 3.6), hyper="nitro", tpm=True, enclaves="unsupported",
               boot=["legacy-bios", "uefi"], dh=False, ar=False, rm="unsupported", tpc=[1, 2],
               vc="even", eit=True, ena="required", usage=["capacity-block", "on-demand", "spot"],
               pp="AMD EPYC 7R13 Processor", clock="3.6 GHz", intel=False,
               feat="AMD Turbo; AVX; AVX2", spot=0.48, srd=True),
    "p5e": dict(gpu=("H200", "NVIDIA", 144384, ["ml-ai"]), gb=141, total="sum",
                cpu=("AMD", "x86_64", 3.6), hyper="nitro", tpm=True, enclaves="unsupported",
                boot=["legacy-bios", "uefi"], dh=False, ar=False, rm="unsupported", tpc=[1, 2],
                vc="even", eit=True, ena="required", usage=["capacity-block", "on-demand"],
                pp="AMD EPYC 7R13 Processor", clock="3.6 GHz", intel=False,
                feat="AMD Turbo; AVX; AVX2", spot=None, srd=True),
    "p5en": dict(gpu=("H200", "NVIDIA", 144384, ["ml-ai"]), gb=141, total="sum",
                 cpu=("Intel", "x86_64", 2.4), hyper="nitro", tpm=True, enclaves="unsupported",
                 boot=["legacy-bios", "uefi"], dh=False, ar=False, rm="unsupported", tpc=[1, 2],
                 vc="even", eit=True, ena="required", usage=["capacity-block", "on-demand", "spot"],
                 pp="Intel Sapphire Rapids 8488C", clock="3.8 GHz", intel=True,
                 feat="Intel AVX; Intel AVX2; Intel AVX512; Intel AMX; Intel Turbo", spot=0.43,
                 srd=True),
    "p6-b200": dict(gpu=("B200", "NVIDIA", 183359, ["ml-ai"]), gb=179, total="sum",
                    cpu=("Intel", "x86_64", 2.4), hyper="nitro", tpm=True, enclaves="unsupported",
                    boot=["uefi"], dh=False, ar=False, rm="unsupported", tpc=[1, 2], vc="even",
                    eit=True, ena="required", usage=["capacity-block", "on-demand", "spot"],
                    pp="Intel Xeon Scalable (Emerald Rapids)", clock="3.9 GHz", intel=True,
                    feat="Intel AVX; Intel AVX2; Intel AVX512; Intel AMX; Intel Turbo", spot=0.62,
                    srd=True),
    # Described by EC2, absent from the price list (EC2_ONLY). GPU names and memory for these
    # three are NOT verified against a real DescribeInstanceTypes response (see README).
    "g7": dict(gpu=("RTX PRO 4500", "NVIDIA", 32768, ["graphics", "ml-ai"]), gb=32,
               total="sum", cpu=("Intel", "x86_64", 3.2), hyper="nitro", tpm=True,
               enclaves="supported", boot=["legacy-bios", "uefi"], dh=False, ar=False,
               rm="unsupported", tpc=[1, 2], vc="even", eit=True, ena="required",
               usage=["on-demand"], pp="Intel Xeon Scalable (Emerald Rapids)",
               clock="3.2 GHz", intel=True,
               feat="Intel AVX; Intel AVX2; Intel AVX512; Intel AMX; Intel Turbo", spot=None),
    "gr6f": dict(gpu=("L4", "NVIDIA", 22888, ["graphics", "ml-ai"]), gb=24, total="part",
                 cpu=("AMD", "x86_64", 3.4), hyper="nitro", tpm=True, enclaves="supported",
                 boot=["legacy-bios", "uefi"], dh=False, ar=False, rm="unsupported", tpc=[1, 2],
                 vc="even", eit=True, ena="required", usage=["on-demand"],
                 pp="AMD EPYC 7R13 Processor", clock="3.95 GHz", intel=False,
                 feat="AMD Turbo; AVX; AVX2", spot=None),
    "p6-b300": dict(gpu=("B300", "NVIDIA", 268800, ["ml-ai"]), gb=262, total="sum",
                    cpu=("Intel", "x86_64", 2.4), hyper="nitro", tpm=True, enclaves="unsupported",
                    boot=["uefi"], dh=False, ar=False, rm="unsupported", tpc=[1, 2], vc="even",
                    eit=True, ena="required", usage=["capacity-block", "on-demand"],
                    pp="Intel Xeon Scalable (Emerald Rapids)", clock="3.9 GHz", intel=True,
                    feat="Intel AVX; Intel AVX2; Intel AVX512; Intel AMX; Intel Turbo", spot=None,
                    srd=True),
}

# ---- Sizes -------------------------------------------------------------------------------
# Each row: vcpu, cores, memory MiB, gpus, disk (count, GB) or None,
#   ebs = (baseline Mbps, baseline IOPS, baseline MB/s, max Mbps, max IOPS, max MB/s),
#   att = (attachment limit type, max attachments) or None (xen),
#   eni = (max ENIs, IPv4/ENI, IPv6/ENI),
#   net = (NetworkPerformance, n cards, card perf, card baseline Gbps, card peak Gbps, queues),
#   efa = max EFA interfaces or None,
#   od  = Linux on-demand USD/h in REGION_ORDER (None = not offered / not priced there).
# On-demand prices: instances.vantage.sh data as republished in github.com/tsaol/aws-gpu
# data/all_gpu_instances.js ("Last updated: 2026-08-26"); p5e.48xlarge is synthetic (no public
# on-demand price found).  Specs for g4dn/g4ad/g5/g5g/p3dn/p4d transcribed from moto's
# instance_types.json (generated from the real API); the rest from AWS docs as reflected in
# Karpenter's generated instance-types reference (memory, GPU MiB, NVMe GB, EBS/network
# bandwidth, EFA count) -- remaining details (IOPS, ENIs, queue counts) are plausible fill-ins.
#             use1       use2       usw2       euw1       euc1       apne1      apse1      aps1
SIZES = {
    # ---- g4dn (T4) ----
    "g4dn.xlarge": dict(vcpu=4, cores=2, mem=16384, gpus=1, disk=(1, 125),
        ebs=(950, 3000, 118.75, 3500, 20000, 437.5), att=("shared", 25), eni=(3, 10, 10),
        net=("Up to 25 Gigabit", 1, "Up to 25 Gigabit", 5.0, 25.0, 8), efa=None,
        od=(0.526, 0.526, 0.526, 0.587, 0.658, 0.71, 0.736, 0.579)),
    "g4dn.2xlarge": dict(vcpu=8, cores=4, mem=32768, gpus=1, disk=(1, 225),
        ebs=(1150, 6000, 143.75, 3500, 20000, 437.5), att=("shared", 25), eni=(3, 10, 10),
        net=("Up to 25 Gigabit", 1, "Up to 25 Gigabit", 10.0, 25.0, 8), efa=None,
        od=(0.752, 0.752, 0.752, 0.838, 0.94, 1.015, 1.052, 0.828)),
    "g4dn.4xlarge": dict(vcpu=16, cores=8, mem=65536, gpus=1, disk=(1, 225),
        ebs=(4750, 20000, 593.75, 4750, 20000, 593.75), att=("shared", 25), eni=(3, 10, 10),
        net=("Up to 25 Gigabit", 1, "Up to 25 Gigabit", 20.0, 25.0, 32), efa=None,
        od=(1.204, 1.204, 1.204, 1.342, 1.505, 1.625, 1.685, 1.325)),
    "g4dn.8xlarge": dict(vcpu=32, cores=16, mem=131072, gpus=1, disk=(1, 900),
        ebs=(9500, 40000, 1187.5, 9500, 40000, 1187.5), att=("shared", 25), eni=(4, 15, 15),
        net=("50 Gigabit", 1, "50 Gigabit", 50.0, 50.0, 32), efa=1,
        od=(2.176, 2.176, 2.176, 2.426, 2.72, 2.938, 3.045, 2.395)),
    "g4dn.12xlarge": dict(vcpu=48, cores=24, mem=196608, gpus=4, disk=(1, 900),
        ebs=(9500, 40000, 1187.5, 9500, 40000, 1187.5), att=("shared", 22), eni=(8, 30, 30),
        net=("50 Gigabit", 1, "50 Gigabit", 50.0, 50.0, 32), efa=1, dh=True,
        od=(3.912, 3.912, 3.912, 4.362, 4.89, 5.281, 5.474, 4.306)),
    "g4dn.16xlarge": dict(vcpu=64, cores=32, mem=262144, gpus=1, disk=(1, 900),
        ebs=(9500, 40000, 1187.5, 9500, 40000, 1187.5), att=("shared", 25), eni=(4, 15, 15),
        net=("50 Gigabit", 1, "50 Gigabit", 50.0, 50.0, 32), efa=1,
        od=(4.352, 4.352, 4.352, 4.853, 5.44, 5.875, 6.089, 4.791)),
    "g4dn.metal": dict(vcpu=96, cores=48, mem=393216, gpus=8, disk=(2, 900),
        ebs=(19000, 80000, 2375.0, 19000, 80000, 2375.0), att=("shared", 31), eni=(15, 50, 50),
        net=("100 Gigabit", 1, "100 Gigabit", 100.0, 100.0, 32), efa=1, dh=True, metal=True,
        od=(7.824, 7.824, 7.824, 8.724, 9.78, 10.562, 10.948, 8.612)),
    # ---- g4ad (Radeon Pro V520) ----
    "g4ad.xlarge": dict(vcpu=4, cores=2, mem=16384, gpus=1, disk=(1, 150),
        ebs=(400, 1700, 50.0, 3170, 13333, 396.25), att=("shared", 25), eni=(2, 4, 4),
        net=("Up to 10 Gigabit", 1, "Up to 10 Gigabit", 2.0, 10.0, 8), efa=None,
        od=(0.37853, 0.37853, 0.37853, 0.42263, 0.47327, 0.51082, None, None)),
    "g4ad.2xlarge": dict(vcpu=8, cores=4, mem=32768, gpus=1, disk=(1, 300),
        ebs=(800, 3400, 100.0, 3170, 13333, 396.25), att=("shared", 25), eni=(2, 4, 4),
        net=("Up to 10 Gigabit", 1, "Up to 10 Gigabit", 4.167, 10.0, 8), efa=None,
        od=(0.54117, 0.54117, 0.54117, 0.60421, 0.67662, 0.7303, None, None)),
    "g4ad.4xlarge": dict(vcpu=16, cores=8, mem=65536, gpus=1, disk=(1, 600),
        ebs=(1580, 6700, 197.5, 3170, 13333, 396.25), att=("shared", 25), eni=(3, 10, 10),
        net=("Up to 10 Gigabit", 1, "Up to 10 Gigabit", 8.333, 10.0, 32), efa=None,
        od=(0.867, 0.867, 0.867, 0.968, 1.084, 1.17, None, None)),
    "g4ad.8xlarge": dict(vcpu=32, cores=16, mem=131072, gpus=2, disk=(1, 1200),
        ebs=(3170, 13333, 396.25, 3170, 13333, 396.25), att=("shared", 24), eni=(4, 15, 15),
        net=("15 Gigabit", 1, "15 Gigabit", 15.0, 15.0, 32), efa=None,
        od=(1.734, 1.734, 1.734, 1.936, 2.168, 2.34, None, None)),
    "g4ad.16xlarge": dict(vcpu=64, cores=32, mem=262144, gpus=4, disk=(2, 1200),
        ebs=(6300, 26667, 787.5, 6300, 26667, 787.5), att=("shared", 21), eni=(8, 30, 30),
        net=("25 Gigabit", 1, "25 Gigabit", 25.0, 25.0, 32), efa=None, dh=False,
        od=(3.468, 3.468, 3.468, 3.872, 4.336, 4.68, None, None)),
    # ---- g5 (A10G) ----
    "g5.xlarge": dict(vcpu=4, cores=2, mem=16384, gpus=1, disk=(1, 250),
        ebs=(700, 3000, 87.5, 3500, 15000, 437.5), att=("shared", 25), eni=(4, 15, 15),
        net=("Up to 10 Gigabit", 1, "Up to 10 Gigabit", 2.5, 10.0, 8), efa=None,
        od=(1.006, 1.006, 1.006, 1.123, 1.258, 1.459, None, 1.208)),
    "g5.2xlarge": dict(vcpu=8, cores=4, mem=32768, gpus=1, disk=(1, 450),
        ebs=(850, 3500, 106.25, 3500, 15000, 437.5), att=("shared", 25), eni=(4, 15, 15),
        net=("Up to 10 Gigabit", 1, "Up to 10 Gigabit", 5.0, 10.0, 8), efa=None,
        od=(1.212, 1.212, 1.212, 1.35296, 1.5156, 1.75776, None, 1.45536)),
    "g5.4xlarge": dict(vcpu=16, cores=8, mem=65536, gpus=1, disk=(1, 600),
        ebs=(4750, 20000, 593.75, 4750, 20000, 593.75), att=("shared", 25), eni=(8, 30, 30),
        net=("Up to 25 Gigabit", 1, "Up to 25 Gigabit", 10.0, 25.0, 32), efa=None,
        od=(1.624, 1.624, 1.624, 1.81287, 2.03081, 2.35528, None, 1.95009)),
    "g5.8xlarge": dict(vcpu=32, cores=16, mem=131072, gpus=1, disk=(1, 900),
        ebs=(16000, 65000, 2000.0, 16000, 65000, 2000.0), att=("shared", 25), eni=(8, 30, 30),
        net=("25 Gigabit", 1, "25 Gigabit", 25.0, 25.0, 32), efa=1,
        od=(2.448, 2.448, 2.448, 2.73271, 3.06122, 3.55033, None, 2.93955)),
    "g5.12xlarge": dict(vcpu=48, cores=24, mem=196608, gpus=4, disk=(1, 3800),
        ebs=(16000, 65000, 2000.0, 16000, 65000, 2000.0), att=("shared", 22), eni=(15, 50, 50),
        net=("40 Gigabit", 1, "40 Gigabit", 40.0, 40.0, 32), efa=1,
        od=(5.672, 5.672, 5.672, 6.33167, 7.09282, 8.22609, None, 6.81091)),
    "g5.16xlarge": dict(vcpu=64, cores=32, mem=262144, gpus=1, disk=(1, 1900),
        ebs=(16000, 65000, 2000.0, 16000, 65000, 2000.0), att=("shared", 25), eni=(8, 30, 30),
        net=("25 Gigabit", 1, "25 Gigabit", 25.0, 25.0, 32), efa=1,
        od=(4.096, 4.096, 4.096, 4.57237, 5.12204, 5.94042, None, 4.91846)),
    "g5.24xlarge": dict(vcpu=96, cores=48, mem=393216, gpus=4, disk=(1, 3800),
        ebs=(19000, 80000, 2375.0, 19000, 80000, 2375.0), att=("shared", 22), eni=(15, 50, 50),
        net=("50 Gigabit", 1, "50 Gigabit", 50.0, 50.0, 32), efa=1, dh=True,
        od=(8.144, 8.144, 8.144, 9.09117, 10.18405, 11.81123, None, 9.77928)),
    "g5.48xlarge": dict(vcpu=192, cores=96, mem=786432, gpus=8, disk=(2, 3800),
        ebs=(19000, 80000, 2375.0, 19000, 80000, 2375.0), att=("shared", 9), eni=(7, 50, 50),
        net=("100 Gigabit", 1, "100 Gigabit", 100.0, 100.0, 32), efa=1, dh=True,
        od=(16.288, 16.288, 16.288, 18.18233, 20.3681, 23.62246, None, 19.55855)),
    # ---- g5g (T4g, Graviton2) ----
    "g5g.xlarge": dict(vcpu=4, cores=4, mem=8192, gpus=1, disk=None,
        ebs=(1188, 6000, 148.5, 4750, 20000, 593.75), att=("shared", 26), eni=(4, 15, 15),
        net=("Up to 10 Gigabit", 1, "Up to 10 Gigabit", 1.25, 10.0, 8), efa=None,
        od=(0.42, None, 0.42, None, 0.5254, 0.5669, 0.5877, None)),
    "g5g.2xlarge": dict(vcpu=8, cores=8, mem=16384, gpus=1, disk=None,
        ebs=(2375, 12000, 296.875, 4750, 20000, 593.75), att=("shared", 26), eni=(4, 15, 15),
        net=("Up to 10 Gigabit", 1, "Up to 10 Gigabit", 2.5, 10.0, 8), efa=None,
        od=(0.556, None, 0.556, None, 0.6955, 0.7505, 0.778, None)),
    "g5g.4xlarge": dict(vcpu=16, cores=16, mem=32768, gpus=1, disk=None,
        ebs=(4750, 20000, 593.75, 4750, 20000, 593.75), att=("shared", 26), eni=(8, 30, 30),
        net=("Up to 10 Gigabit", 1, "Up to 10 Gigabit", 5.0, 10.0, 8), efa=None,
        od=(0.828, None, 0.828, None, 1.0358, 1.1176, 1.1586, None)),
    "g5g.8xlarge": dict(vcpu=32, cores=32, mem=65536, gpus=1, disk=None,
        ebs=(9500, 40000, 1187.5, 9500, 40000, 1187.5), att=("shared", 26), eni=(8, 30, 30),
        net=("12 Gigabit", 1, "12 Gigabit", 12.0, 12.0, 8), efa=None,
        od=(1.372, None, 1.372, None, 1.7163, 1.8519, 1.9198, None)),
    "g5g.16xlarge": dict(vcpu=64, cores=64, mem=131072, gpus=2, disk=None,
        ebs=(19000, 80000, 2375.0, 19000, 80000, 2375.0), att=("shared", 25), eni=(15, 50, 50),
        net=("25 Gigabit", 1, "25 Gigabit", 25.0, 25.0, 8), efa=None, dh=True,
        od=(2.744, None, 2.744, None, 3.4326, 3.7039, 3.8395, None)),
    # ---- g6 (L4) ----
    "g6.xlarge": dict(vcpu=4, cores=2, mem=16384, gpus=1, disk=(1, 250),
        ebs=(1250, 5000, 156.25, 5000, 20000, 625.0), att=("shared", 27), eni=(4, 15, 15),
        net=("Up to 10 Gigabit", 1, "Up to 10 Gigabit", 2.5, 10.0, 8), efa=None,
        od=(0.8048, 0.8048, 0.8048, None, 1.0064, 1.1672, None, 0.9664)),
    "g6.2xlarge": dict(vcpu=8, cores=4, mem=32768, gpus=1, disk=(1, 450),
        ebs=(2500, 10000, 312.5, 5000, 20000, 625.0), att=("shared", 27), eni=(4, 15, 15),
        net=("Up to 10 Gigabit", 1, "Up to 10 Gigabit", 5.0, 10.0, 8), efa=None,
        od=(0.9776, 0.9776, 0.9776, None, 1.22249, 1.41781, None, 1.1739)),
    "g6.4xlarge": dict(vcpu=16, cores=8, mem=65536, gpus=1, disk=(1, 600),
        ebs=(8000, 32000, 1000.0, 8000, 32000, 1000.0), att=("shared", 27), eni=(8, 30, 30),
        net=("Up to 25 Gigabit", 1, "Up to 25 Gigabit", 10.0, 25.0, 16), efa=None,
        od=(1.3232, 1.3232, 1.3232, None, 1.65466, 1.91903, None, 1.58889)),
    "g6.8xlarge": dict(vcpu=32, cores=16, mem=131072, gpus=1, disk=(2, 450),
        ebs=(16000, 64000, 2000.0, 16000, 64000, 2000.0), att=("shared", 27), eni=(8, 30, 30),
        net=("25 Gigabit", 1, "25 Gigabit", 25.0, 25.0, 32), efa=1,
        od=(2.0144, 2.0144, 2.0144, None, 2.519, 2.92148, None, 2.41888)),
    "g6.12xlarge": dict(vcpu=48, cores=24, mem=196608, gpus=4, disk=(4, 940),
        ebs=(20000, 80000, 2500.0, 20000, 80000, 2500.0), att=("shared", 27), eni=(8, 30, 30),
        net=("40 Gigabit", 1, "40 Gigabit", 40.0, 40.0, 32), efa=1,
        od=(4.6016, 4.6016, 4.6016, None, 5.75429, 6.67369, None, 5.52558)),
    "g6.16xlarge": dict(vcpu=64, cores=32, mem=262144, gpus=1, disk=(2, 940),
        ebs=(20000, 80000, 2500.0, 20000, 80000, 2500.0), att=("shared", 27), eni=(15, 50, 50),
        net=("25 Gigabit", 1, "25 Gigabit", 25.0, 25.0, 32), efa=1,
        od=(3.3968, 3.3968, 3.3968, None, 4.24769, 4.92637, None, 4.07886)),
    "g6.24xlarge": dict(vcpu=96, cores=48, mem=393216, gpus=4, disk=(4, 940),
        ebs=(30000, 120000, 3750.0, 30000, 120000, 3750.0), att=("shared", 27), eni=(15, 50, 50),
        net=("50 Gigabit", 1, "50 Gigabit", 50.0, 50.0, 32), efa=1,
        od=(6.6752, 6.6752, 6.6752, None, 8.34732, 9.68103, None, 8.01555)),
    "g6.48xlarge": dict(vcpu=192, cores=96, mem=786432, gpus=8, disk=(8, 940),
        ebs=(60000, 240000, 7500.0, 60000, 240000, 7500.0), att=("shared", 27), eni=(15, 50, 50),
        net=("100 Gigabit", 1, "100 Gigabit", 100.0, 100.0, 32), efa=1,
        od=(13.3504, 13.3504, 13.3504, None, 16.69464, 19.36206, None, 16.0311)),
    # ---- gr6 (L4, higher memory ratio) ----
    "gr6.4xlarge": dict(vcpu=16, cores=8, mem=131072, gpus=1, disk=(1, 600),
        ebs=(8000, 32000, 1000.0, 8000, 32000, 1000.0), att=("shared", 27), eni=(8, 30, 30),
        net=("Up to 25 Gigabit", 1, "Up to 25 Gigabit", 10.0, 25.0, 16), efa=None,
        od=(1.5392, 1.5392, 1.5392, None, 1.9248, 2.2323, None, 1.8483)),
    "gr6.8xlarge": dict(vcpu=32, cores=16, mem=262144, gpus=1, disk=(2, 450),
        ebs=(16000, 64000, 2000.0, 16000, 64000, 2000.0), att=("shared", 27), eni=(8, 30, 30),
        net=("25 Gigabit", 1, "25 Gigabit", 25.0, 25.0, 32), efa=1,
        od=(2.4464, 2.4464, 2.4464, None, 3.05927, 3.54801, None, 2.93768)),
    # ---- g6f (fractional L4): part = GpuPartitionSize ----
    "g6f.large": dict(vcpu=2, cores=1, mem=8192, gpus=0, part=0.125, gpu_mib=2861, disk=(1, 100),
        ebs=(650, 2500, 81.25, 5000, 20000, 625.0), att=("shared", 27), eni=(2, 4, 4),
        net=("Up to 10 Gigabit", 1, "Up to 10 Gigabit", 0.75, 10.0, 2), efa=None,
        od=(0.202, 0.202, 0.202, None, 0.25261, 0.29296, None, 0.24256)),
    "g6f.xlarge": dict(vcpu=4, cores=2, mem=16384, gpus=0, part=0.125, gpu_mib=2861, disk=(1, 100),
        ebs=(1250, 5000, 156.25, 5000, 20000, 625.0), att=("shared", 27), eni=(4, 15, 15),
        net=("Up to 10 Gigabit", 1, "Up to 10 Gigabit", 1.5, 10.0, 4), efa=None,
        od=(0.2375, 0.2375, 0.2375, None, 0.297, 0.34444, None, 0.28519)),
    "g6f.2xlarge": dict(vcpu=8, cores=4, mem=32768, gpus=0, part=0.25, gpu_mib=5722, disk=(1, 200),
        ebs=(2500, 10000, 312.5, 5000, 20000, 625.0), att=("shared", 27), eni=(4, 15, 15),
        net=("Up to 10 Gigabit", 1, "Up to 10 Gigabit", 3.0, 10.0, 8), efa=None,
        od=(0.475, 0.475, 0.475, None, 0.594, 0.68888, None, 0.57038)),
    "g6f.4xlarge": dict(vcpu=16, cores=8, mem=65536, gpus=0, part=0.5, gpu_mib=11444, disk=(1, 450),
        ebs=(6000, 24000, 750.0, 6000, 24000, 750.0), att=("shared", 27), eni=(8, 30, 30),
        net=("Up to 25 Gigabit", 1, "Up to 25 Gigabit", 6.25, 25.0, 16), efa=None,
        od=(0.95, 0.95, 0.95, None, 1.188, 1.37776, None, 1.14076)),
    # ---- g6e (L40S) ----
    "g6e.xlarge": dict(vcpu=4, cores=2, mem=32768, gpus=1, disk=(1, 250),
        ebs=(1250, 5000, 156.25, 5000, 20000, 625.0), att=("shared", 27), eni=(4, 15, 15),
        net=("Up to 20 Gigabit", 1, "Up to 20 Gigabit", 2.5, 20.0, 8), efa=None,
        od=(1.861, 1.861, 1.861, None, 2.327, 2.699, None, 2.235)),
    "g6e.2xlarge": dict(vcpu=8, cores=4, mem=65536, gpus=1, disk=(1, 450),
        ebs=(2500, 10000, 312.5, 5000, 20000, 625.0), att=("shared", 27), eni=(4, 15, 15),
        net=("Up to 20 Gigabit", 1, "Up to 20 Gigabit", 5.0, 20.0, 8), efa=None,
        od=(2.24208, 2.24208, 2.24208, None, 2.8035, 3.25168, None, 2.69266)),
    "g6e.4xlarge": dict(vcpu=16, cores=8, mem=131072, gpus=1, disk=(1, 600),
        ebs=(8000, 32000, 1000.0, 8000, 32000, 1000.0), att=("shared", 27), eni=(8, 30, 30),
        net=("20 Gigabit", 1, "20 Gigabit", 20.0, 20.0, 16), efa=None,
        od=(3.00424, 3.00424, 3.00424, None, 3.75651, 4.35703, None, 3.60799)),
    "g6e.8xlarge": dict(vcpu=32, cores=16, mem=262144, gpus=1, disk=(2, 450),
        ebs=(16000, 64000, 2000.0, 16000, 64000, 2000.0), att=("shared", 27), eni=(8, 30, 30),
        net=("25 Gigabit", 1, "25 Gigabit", 25.0, 25.0, 32), efa=1,
        od=(4.52856, 4.52856, 4.52856, None, 5.66252, 6.56775, None, 5.43865)),
    "g6e.12xlarge": dict(vcpu=48, cores=24, mem=393216, gpus=4, disk=(2, 1900),
        ebs=(20000, 80000, 2500.0, 20000, 80000, 2500.0), att=("shared", 27), eni=(10, 30, 30),
        net=("100 Gigabit", 1, "100 Gigabit", 100.0, 100.0, 32), efa=1,
        od=(10.49264, 10.49264, 10.49264, None, 13.12002, 15.21742, None, 12.60131)),
    "g6e.16xlarge": dict(vcpu=64, cores=32, mem=524288, gpus=1, disk=(2, 950),
        ebs=(20000, 80000, 2500.0, 20000, 80000, 2500.0), att=("shared", 27), eni=(15, 50, 50),
        net=("35 Gigabit", 1, "35 Gigabit", 35.0, 35.0, 32), efa=1,
        od=(7.57719, 7.57719, 7.57719, None, 9.47454, 10.98917, None, 9.09996)),
    "g6e.24xlarge": dict(vcpu=96, cores=48, mem=786432, gpus=4, disk=(2, 1900),
        ebs=(30000, 120000, 3750.0, 30000, 120000, 3750.0), att=("shared", 27), eni=(20, 50, 50),
        net=("200 Gigabit", 2, "100 Gigabit", 100.0, 100.0, 32), efa=2,
        od=(15.06559, 15.06559, 15.06559, None, 18.83806, 21.84956, None, 18.09328)),
    "g6e.48xlarge": dict(vcpu=192, cores=96, mem=1572864, gpus=8, disk=(4, 1900),
        ebs=(60000, 240000, 7500.0, 60000, 240000, 7500.0), att=("shared", 27), eni=(40, 50, 50),
        net=("400 Gigabit", 4, "100 Gigabit", 100.0, 100.0, 32), efa=4,
        od=(30.13118, 30.13118, 30.13118, None, 37.67612, 43.69912, None, 36.18656)),
    # ---- g7e (RTX PRO Server 6000) ----
    "g7e.2xlarge": dict(vcpu=8, cores=4, mem=65536, gpus=1, disk=(1, 1900),
        ebs=(5000, 20000, 625.0, 10000, 40000, 1250.0), att=("shared", 27), eni=(4, 15, 15),
        net=("50 Gigabit", 1, "50 Gigabit", 50.0, 50.0, 16), efa=None,
        od=(3.36312, 3.36312, 3.36312, None, 5.71915, 4.87752, None, 5.49303)),
    "g7e.4xlarge": dict(vcpu=16, cores=8, mem=131072, gpus=1, disk=(1, 1900),
        ebs=(8000, 32000, 1000.0, 15000, 60000, 1875.0), att=("shared", 27), eni=(8, 30, 30),
        net=("50 Gigabit", 1, "50 Gigabit", 50.0, 50.0, 32), efa=None,
        od=(3.99816, 3.99816, 3.99816, None, 6.79907, 5.79852, None, 6.53025)),
    "g7e.8xlarge": dict(vcpu=32, cores=16, mem=262144, gpus=1, disk=(1, 1900),
        ebs=(20000, 80000, 2500.0, 20000, 80000, 2500.0), att=("shared", 27), eni=(8, 30, 30),
        net=("100 Gigabit", 1, "100 Gigabit", 100.0, 100.0, 32), efa=1,
        od=(5.26824, 5.26824, 5.26824, None, 8.9589, 7.64051, None, 8.60469)),
    "g7e.12xlarge": dict(vcpu=48, cores=24, mem=524288, gpus=2, disk=(1, 3800),
        ebs=(40000, 160000, 5000.0, 40000, 160000, 5000.0), att=("shared", 27), eni=(16, 50, 50),
        net=("400 Gigabit", 1, "400 Gigabit", 400.0, 400.0, 32), efa=1,
        od=(8.28608, 8.28608, 8.28608, None, 14.09088, 12.01727, None, 13.53377)),
    "g7e.24xlarge": dict(vcpu=96, cores=48, mem=1048576, gpus=4, disk=(2, 1900),
        ebs=(60000, 240000, 7500.0, 60000, 240000, 7500.0), att=("shared", 27), eni=(32, 50, 50),
        net=("800 Gigabit", 2, "400 Gigabit", 400.0, 400.0, 32), efa=2,
        od=(16.57216, 16.57216, 16.57216, None, 28.18177, 24.03454, None, 27.06754)),
    "g7e.48xlarge": dict(vcpu=192, cores=96, mem=2097152, gpus=8, disk=(4, 950),
        ebs=(100000, 400000, 12500.0, 100000, 400000, 12500.0), att=("dedicated", 32),
        eni=(64, 50, 50), net=("1600 Gigabit", 4, "400 Gigabit", 400.0, 400.0, 32), efa=4,
        od=(33.14432, 33.14432, 33.14432, None, 56.36354, 48.06908, None, 54.13507)),
    # ---- p3 (V100 16 GB, Xen) ----
    "p3.2xlarge": dict(vcpu=8, cores=4, mem=62464, gpus=1, disk=None,
        ebs=(1750, 10000, 218.75, 1750, 10000, 218.75), att=None, eni=(4, 15, 15),
        net=("Up to 10 Gigabit", 1, "Up to 10 Gigabit", 1.25, 10.0, None), efa=None,
        od=(3.06, 3.06, 3.06, 3.305, 3.823, 4.194, 4.234, None), ecu="31"),
    "p3.8xlarge": dict(vcpu=32, cores=16, mem=249856, gpus=4, disk=None,
        ebs=(7000, 40000, 875.0, 7000, 40000, 875.0), att=None, eni=(8, 30, 30),
        net=("10 Gigabit", 1, "10 Gigabit", 10.0, 10.0, None), efa=None,
        od=(12.24, 12.24, 12.24, 13.22, 15.292, 16.776, 16.936, None), ecu="97"),
    "p3.16xlarge": dict(vcpu=64, cores=32, mem=499712, gpus=8, disk=None,
        ebs=(14000, 80000, 1750.0, 14000, 80000, 1750.0), att=None, eni=(8, 30, 30),
        net=("25 Gigabit", 1, "25 Gigabit", 25.0, 25.0, None), efa=None,
        od=(24.48, 24.48, 24.48, 26.44, 30.584, 33.552, 33.872, None), ecu="188"),
    # ---- p3dn / p4d / p4de ----
    "p3dn.24xlarge": dict(vcpu=96, cores=48, mem=786432, gpus=8, disk=(2, 900),
        ebs=(19000, 80000, 2375.0, 19000, 80000, 2375.0), att=("shared", 17), eni=(15, 50, 50),
        net=("100 Gigabit", 1, "100 Gigabit", 100.0, 100.0, 32), efa=1,
        od=(31.212, None, 31.212, 33.711, None, 42.783, None, None)),
    "p4d.24xlarge": dict(vcpu=96, cores=48, mem=1179648, gpus=8, disk=(8, 1000),
        ebs=(19000, 80000, 2375.0, 19000, 80000, 2375.0), att=("dedicated", 28), eni=(60, 50, 50),
        net=("4x 100 Gigabit", 4, "100 Gigabit", 100.0, 100.0, 32), efa=4,
        od=(21.957642, 21.95764, 21.95764, 23.71569, 27.43298, 30.09784, 26.34917, 26.3444)),
    "p4de.24xlarge": dict(vcpu=96, cores=48, mem=1179648, gpus=8, disk=(8, 1000),
        ebs=(19000, 80000, 2375.0, 19000, 80000, 2375.0), att=("dedicated", 28), eni=(60, 50, 50),
        net=("4x 100 Gigabit", 4, "100 Gigabit", 100.0, 100.0, 32), efa=4,
        od=(27.44705, None, 27.44705, None, 34.29122, 37.6223, 32.93646, None)),
    # ---- p5 / p5e / p5en / p6-b200 ----
    "p5.4xlarge": dict(vcpu=16, cores=8, mem=262144, gpus=0, part=1.0, disk=(1, 3800),
        ebs=(10000, 40000, 1250.0, 10000, 40000, 1250.0), att=("shared", 27), eni=(4, 30, 30),
        net=("100 Gigabit", 1, "100 Gigabit", 100.0, 100.0, 32), efa=1, price_gpus=1,
        od=(6.88, 6.88, 6.88, None, None, 8.6, None, 8.256)),
    "p5.48xlarge": dict(vcpu=192, cores=96, mem=2097152, gpus=8, disk=(8, 3800),
        ebs=(80000, 260000, 10000.0, 80000, 260000, 10000.0), att=("dedicated", 32),
        eni=(64, 50, 50), net=("3200 Gigabit", 32, "100 Gigabit", 100.0, 100.0, 32), efa=32,
        od=(55.04, 55.04, 55.04, None, None, 68.8, None, 66.048)),
    "p5e.48xlarge": dict(vcpu=192, cores=96, mem=2097152, gpus=8, disk=(8, 3800),
        ebs=(80000, 260000, 10000.0, 80000, 260000, 10000.0), att=("dedicated", 32),
        eni=(64, 50, 50), net=("3200 Gigabit", 32, "100 Gigabit", 100.0, 100.0, 32), efa=32,
        od=(None, 59.168, None, None, None, None, None, None)),   # synthetic price
    "p5en.48xlarge": dict(vcpu=192, cores=96, mem=2097152, gpus=8, disk=(8, 3800),
        ebs=(100000, 400000, 12500.0, 100000, 400000, 12500.0), att=("dedicated", 32),
        eni=(32, 50, 50), net=("3200 Gigabit", 16, "200 Gigabit", 200.0, 200.0, 32), efa=16,
        od=(63.296, 63.296, 63.296, None, None, 79.12, None, 75.9552)),
    "p6-b200.48xlarge": dict(vcpu=192, cores=96, mem=2097152, gpus=8, disk=(8, 3800),
        ebs=(100000, 400000, 12500.0, 100000, 400000, 12500.0), att=("dedicated", 32),
        eni=(16, 50, 50), net=("3200 Gigabit", 8, "400 Gigabit", 400.0, 400.0, 32), efa=8,
        od=(113.9328, 113.9328, 113.9328, None, None, None, None, 160.64525)),
    # ---- described by EC2 only (no price-list row anywhere): vCPU, memory, GPU count, disks
    # and network from instances.vantage.sh as republished in github.com/tsaol/aws-gpu; the
    # rest are fill-ins.
    "g7.2xlarge": dict(vcpu=8, cores=4, mem=32768, gpus=1, disk=(1, 440),
        ebs=(5000, 20000, 625.0, 10000, 40000, 1250.0), att=("shared", 27), eni=(4, 15, 15),
        net=("Up to 60 Gigabit", 1, "Up to 60 Gigabit", 15.0, 60.0, 16), efa=None, od=(None,) * 8),
    "g7.4xlarge": dict(vcpu=16, cores=8, mem=65536, gpus=1, disk=(1, 875),
        ebs=(8000, 32000, 1000.0, 15000, 60000, 1875.0), att=("shared", 27), eni=(8, 30, 30),
        net=("Up to 100 Gigabit", 1, "Up to 100 Gigabit", 25.0, 100.0, 32), efa=None,
        od=(None,) * 8),
    "g7.8xlarge": dict(vcpu=32, cores=16, mem=131072, gpus=1, disk=(1, 930),
        ebs=(20000, 80000, 2500.0, 20000, 80000, 2500.0), att=("shared", 27), eni=(8, 30, 30),
        net=("100 Gigabit", 1, "100 Gigabit", 100.0, 100.0, 32), efa=1, od=(None,) * 8),
    "g7.12xlarge": dict(vcpu=48, cores=24, mem=196608, gpus=2, disk=(1, 1900),
        ebs=(40000, 160000, 5000.0, 40000, 160000, 5000.0), att=("shared", 27), eni=(16, 50, 50),
        net=("175 Gigabit", 1, "175 Gigabit", 175.0, 175.0, 32), efa=1, od=(None,) * 8),
    "g7.24xlarge": dict(vcpu=96, cores=48, mem=393216, gpus=4, disk=(2, 1900),
        ebs=(60000, 240000, 7500.0, 60000, 240000, 7500.0), att=("shared", 27), eni=(32, 50, 50),
        net=("350 Gigabit", 1, "350 Gigabit", 350.0, 350.0, 32), efa=1, od=(None,) * 8),
    "g7.48xlarge": dict(vcpu=192, cores=96, mem=786432, gpus=8, disk=(2, 1900),
        ebs=(100000, 400000, 12500.0, 100000, 400000, 12500.0), att=("dedicated", 32),
        eni=(64, 50, 50), net=("700 Gigabit", 2, "350 Gigabit", 350.0, 350.0, 32), efa=2,
        od=(None,) * 8),
    "gr6f.4xlarge": dict(vcpu=16, cores=8, mem=131072, gpus=0, part=0.5, gpu_mib=11444,
        disk=(1, 450), ebs=(6000, 24000, 750.0, 6000, 24000, 750.0), att=("shared", 27),
        eni=(8, 30, 30), net=("Up to 25 Gigabit", 1, "Up to 25 Gigabit", 6.25, 25.0, 16),
        efa=None, od=(None,) * 8),
    "p6-b300.48xlarge": dict(vcpu=192, cores=96, mem=4194304, gpus=8, disk=(8, 475),
        ebs=(100000, 400000, 12500.0, 100000, 400000, 12500.0), att=("dedicated", 32),
        eni=(16, 50, 50), net=("6400 Gigabit", 8, "800 Gigabit", 800.0, 800.0, 32), efa=8,
        od=(None,) * 8),
}

# Types EC2 describes (and offers in some AZs) that the price list has no row for: issue #15
# reports g7, p6-b300 and gr6f like this; the adapter must say so in its notes.
EC2_ONLY = {
    **{t: ["us-east-1", "us-east-2", "us-west-2"]
       for t in ("g7.2xlarge", "g7.4xlarge", "g7.8xlarge", "g7.12xlarge", "g7.24xlarge", "g7.48xlarge")},
    "gr6f.4xlarge": ["us-east-1", "us-east-2", "us-west-2", "eu-central-1"],
    "p6-b300.48xlarge": ["us-west-2"],
}

# Linux on-demand USD/h of SIZES types in MORE_REGIONS (a type absent from a region is not
# priced there).  Transcribed from github.com/tsaol/aws-gpu data/all_gpu_instances.js at
# commit 7412fd2 ("Last updated: 2026-01-21", instances.vantage.sh data): every one of that
# file's 359 (type, region) prices for REGION_ORDER equals the 2026-08-26 version's used above.
OD_MORE_REGIONS = {
    "g4dn.xlarge": {"af-south-1": 0.698, "ap-east-1": 0.81, "ap-northeast-2": 0.647,
        "ap-northeast-3": 0.71, "ap-southeast-2": 0.684, "ca-central-1": 0.584,
        "eu-north-1": 0.558, "eu-south-1": 0.616, "eu-west-2": 0.615, "eu-west-3": 0.615,
        "me-south-1": 0.645, "sa-east-1": 0.894, "us-west-1": 0.631},
    "g4dn.2xlarge": {"af-south-1": 0.998, "ap-east-1": 1.158, "ap-northeast-2": 0.925,
        "ap-northeast-3": 1.015, "ap-southeast-2": 0.978, "ca-central-1": 0.835,
        "eu-north-1": 0.798, "eu-south-1": 0.88, "eu-west-2": 0.88, "eu-west-3": 0.879,
        "me-south-1": 0.922, "sa-east-1": 1.278, "us-west-1": 0.902},
    "g4dn.4xlarge": {"af-south-1": 1.597, "ap-east-1": 1.854, "ap-northeast-2": 1.481,
        "ap-northeast-3": 1.625, "ap-southeast-2": 1.566, "ca-central-1": 1.337,
        "eu-north-1": 1.277, "eu-south-1": 1.41, "eu-west-2": 1.409, "eu-west-3": 1.408,
        "me-south-1": 1.477, "sa-east-1": 2.046, "us-west-1": 1.445},
    "g4dn.8xlarge": {"af-south-1": 2.887, "ap-east-1": 3.351, "ap-northeast-2": 2.677,
        "ap-northeast-3": 2.938, "ap-southeast-2": 2.83, "ca-central-1": 2.416,
        "eu-north-1": 2.308, "eu-south-1": 2.547, "eu-west-2": 2.546, "eu-west-3": 2.544,
        "me-south-1": 2.669, "sa-east-1": 3.698, "us-west-1": 2.611},
    "g4dn.12xlarge": {"af-south-1": 5.19, "ap-east-1": 6.024, "ap-northeast-2": 4.812,
        "ap-northeast-3": 5.281, "ap-southeast-2": 5.087, "ca-central-1": 4.343,
        "eu-north-1": 4.15, "eu-south-1": 4.58, "eu-west-2": 4.577, "eu-west-3": 4.574,
        "me-south-1": 4.798, "sa-east-1": 6.649, "us-west-1": 4.694},
    "g4dn.16xlarge": {"af-south-1": 5.774, "ap-east-1": 6.702, "ap-northeast-2": 5.353,
        "ap-northeast-3": 5.875, "ap-southeast-2": 5.659, "ca-central-1": 4.832,
        "eu-north-1": 4.617, "eu-south-1": 5.095, "eu-west-2": 5.092, "eu-west-3": 5.088,
        "me-south-1": 5.338, "sa-east-1": 7.397, "us-west-1": 5.222},
    "g4dn.metal": {"af-south-1": 10.381, "ap-east-1": 12.048, "ap-northeast-2": 9.624,
        "ap-northeast-3": 10.562, "ap-southeast-2": 10.174, "ca-central-1": 8.687,
        "eu-north-1": 8.3, "eu-south-1": 9.16, "eu-west-2": 9.154, "eu-west-3": 9.148,
        "me-south-1": 9.596, "sa-east-1": 13.298, "us-west-1": 9.389},
    "g4ad.xlarge": {"ca-central-1": 0.42263, "eu-west-2": 0.44271},
    "g4ad.2xlarge": {"ca-central-1": 0.60421, "eu-west-2": 0.63292},
    "g4ad.4xlarge": {"ca-central-1": 0.968, "eu-west-2": 1.014},
    "g4ad.8xlarge": {"ca-central-1": 1.936, "eu-west-2": 2.028},
    "g4ad.16xlarge": {"ca-central-1": 3.872, "eu-west-2": 4.056},
    "g5.xlarge": {"ap-east-1": 1.5488, "ap-northeast-2": 1.237, "ap-southeast-2": 1.308,
        "ap-southeast-3": 1.408, "ca-central-1": 1.117, "eu-north-1": 1.067, "eu-west-2": 1.277,
        "il-central-1": 1.17915, "me-central-1": 1.234, "sa-east-1": 1.71},
    "g5.2xlarge": {"ap-east-1": 1.86595, "ap-northeast-2": 1.4903, "ap-southeast-2": 1.57584,
        "ap-southeast-3": 1.69632, "ca-central-1": 1.34573, "eu-north-1": 1.28549,
        "eu-west-2": 1.53849, "il-central-1": 1.42061, "me-central-1": 1.48669,
        "sa-east-1": 2.06016},
    "g5.4xlarge": {"ap-east-1": 2.50025, "ap-northeast-2": 1.99691, "ap-southeast-2": 2.11152,
        "ap-southeast-3": 2.27295, "ca-central-1": 1.80319, "eu-north-1": 1.72247,
        "eu-west-2": 2.06148, "il-central-1": 1.90352, "me-central-1": 1.99206,
        "sa-east-1": 2.76048},
    "g5.8xlarge": {"ap-east-1": 3.76885, "ap-northeast-2": 3.01012, "ap-southeast-2": 3.18289,
        "ap-southeast-3": 3.42623, "ca-central-1": 2.71811, "eu-north-1": 2.59644,
        "eu-west-2": 3.10745, "il-central-1": 2.86934, "me-central-1": 3.00282,
        "sa-east-1": 4.16111},
    "g5.12xlarge": {"ap-east-1": 8.7324, "ap-northeast-2": 6.97442, "ap-southeast-2": 7.37473,
        "ap-southeast-3": 7.93854, "ca-central-1": 6.29784, "eu-north-1": 6.01593,
        "eu-west-2": 7.19994, "il-central-1": 6.64825, "me-central-1": 6.9575,
        "sa-east-1": 9.64127},
    "g5.16xlarge": {"ap-east-1": 6.30605, "ap-northeast-2": 5.03653, "ap-southeast-2": 5.32561,
        "ap-southeast-3": 5.73277, "ca-central-1": 4.54794, "eu-north-1": 4.34437,
        "eu-west-2": 5.1994, "il-central-1": 4.80099, "me-central-1": 5.02432,
        "sa-east-1": 6.96239},
    "g5.24xlarge": {"ap-east-1": 12.5382, "ap-northeast-2": 10.01404, "ap-southeast-2": 10.58882,
        "ap-southeast-3": 11.39836, "ca-central-1": 9.04259, "eu-north-1": 8.63782,
        "eu-west-2": 10.33786, "il-central-1": 9.54572, "me-central-1": 9.98976,
        "sa-east-1": 13.84318},
    "g5.48xlarge": {"ap-east-1": 25.0764, "ap-northeast-2": 20.02809, "ap-southeast-2": 21.17764,
        "ap-southeast-3": 22.79672, "ca-central-1": 18.08518, "eu-north-1": 17.27564,
        "eu-west-2": 20.67572, "il-central-1": 19.09145, "me-central-1": 19.97951,
        "sa-east-1": 27.68636},
    "g5g.xlarge": {"ap-northeast-2": 0.5166, "eu-south-2": 0.4687},
    "g5g.2xlarge": {"ap-northeast-2": 0.6839, "eu-south-2": 0.6205},
    "g5g.4xlarge": {"ap-northeast-2": 1.0185, "eu-south-2": 0.924},
    "g5g.8xlarge": {"ap-northeast-2": 1.6876, "eu-south-2": 1.5311},
    "g5g.16xlarge": {"ap-northeast-2": 3.3752, "eu-south-2": 3.0622},
    "g6.xlarge": {"ap-northeast-2": 0.9896, "ap-south-2": 0.9664, "ap-southeast-2": 1.0464,
        "ap-southeast-5": 1.0138, "ca-central-1": 0.8936, "eu-central-2": 1.085,
        "eu-north-1": 0.8536, "eu-south-2": 0.848, "eu-west-2": 1.0216, "eu-west-3": 1.0216,
        "me-central-1": 0.98824, "sa-east-1": 1.368},
    "g6.2xlarge": {"ap-northeast-2": 1.20208, "ap-south-2": 1.1739, "ap-southeast-2": 1.27107,
        "ap-southeast-5": 1.23147, "ca-central-1": 1.08547, "eu-central-2": 1.31796,
        "eu-north-1": 1.03688, "eu-south-2": 1.03008, "eu-west-2": 1.24095, "eu-west-3": 1.24095,
        "me-central-1": 1.20043, "sa-east-1": 1.66173},
    "g6.4xlarge": {"ap-northeast-2": 1.62704, "ap-south-2": 1.58889, "ap-southeast-2": 1.72042,
        "ap-southeast-5": 1.66682, "ca-central-1": 1.4692, "eu-central-2": 1.78389,
        "eu-north-1": 1.40343, "eu-south-2": 1.39423, "eu-west-2": 1.67965, "eu-west-3": 1.67965,
        "me-central-1": 1.6248, "sa-east-1": 2.24918},
    "g6.8xlarge": {"ap-northeast-2": 2.47695, "ap-south-2": 2.41888, "ap-southeast-2": 2.61912,
        "ap-southeast-5": 2.53752, "ca-central-1": 2.23666, "eu-central-2": 2.71574,
        "eu-north-1": 2.13655, "eu-south-2": 2.12253, "eu-west-2": 2.55705, "eu-west-3": 2.55705,
        "me-central-1": 2.47355, "sa-east-1": 3.42408},
    "g6.12xlarge": {"ap-northeast-2": 5.65823, "ap-south-2": 5.52558, "ap-southeast-2": 5.98299,
        "ap-southeast-5": 5.7966, "ca-central-1": 5.10933, "eu-central-2": 6.2037,
        "eu-north-1": 4.88062, "eu-south-2": 4.8486, "eu-west-2": 5.8412, "eu-west-3": 5.8412,
        "me-central-1": 5.65045, "sa-east-1": 7.82181},
    "g6.16xlarge": {"ap-northeast-2": 4.17678, "ap-south-2": 4.07886, "ap-southeast-2": 4.41652,
        "ap-southeast-5": 4.27892, "ca-central-1": 3.7716, "eu-central-2": 4.57943,
        "eu-north-1": 3.60277, "eu-south-2": 3.57913, "eu-west-2": 4.31184, "eu-west-3": 4.31184,
        "me-central-1": 4.17104, "sa-east-1": 5.77388},
    "g6.24xlarge": {"ap-northeast-2": 8.20797, "ap-south-2": 8.01555, "ap-southeast-2": 8.67909,
        "ap-southeast-5": 8.4087, "ca-central-1": 7.41173, "eu-central-2": 8.99924,
        "eu-north-1": 7.07996, "eu-south-2": 7.03351, "eu-west-2": 8.47339, "eu-west-3": 8.47339,
        "me-central-1": 8.19669, "sa-east-1": 11.34651},
    "g6.48xlarge": {"ap-northeast-2": 16.41595, "ap-south-2": 16.0311, "ap-southeast-2": 17.35817,
        "ap-southeast-5": 16.81739, "ca-central-1": 14.82346, "eu-central-2": 17.99849,
        "eu-north-1": 14.15992, "eu-south-2": 14.06702, "eu-west-2": 16.94678,
        "eu-west-3": 16.94678, "me-central-1": 16.39339, "sa-east-1": 22.69303},
    "gr6.4xlarge": {"ap-northeast-2": 1.8926, "ap-southeast-2": 2.0012, "ap-southeast-5": 1.9388,
        "ca-central-1": 1.709, "eu-central-2": 2.1649, "eu-north-1": 1.6326, "eu-south-2": 1.6218,
        "eu-west-2": 1.9539, "eu-west-3": 1.9538, "sa-east-1": 2.6164},
    "gr6.8xlarge": {"ap-northeast-2": 3.00809, "ap-southeast-2": 3.1807, "ap-southeast-5": 3.08152,
        "ca-central-1": 2.71628, "eu-central-2": 3.44089, "eu-north-1": 2.59485,
        "eu-south-2": 2.57768, "eu-west-2": 3.10552, "eu-west-3": 3.10536, "sa-east-1": 4.1585},
    "g6f.large": {"ap-northeast-2": 0.24838, "ap-southeast-2": 0.26264, "ca-central-1": 0.22429,
        "eu-north-1": 0.21424, "eu-south-2": 0.22725, "eu-west-2": 0.25642, "sa-east-1": 0.34336},
    "g6f.xlarge": {"ap-northeast-2": 0.29203, "ap-southeast-2": 0.30879, "ca-central-1": 0.26371,
        "eu-north-1": 0.2519, "eu-south-2": 0.26719, "eu-west-2": 0.30149, "sa-east-1": 0.40371},
    "g6f.2xlarge": {"ap-northeast-2": 0.58406, "ap-southeast-2": 0.61759, "ca-central-1": 0.52741,
        "eu-north-1": 0.50379, "eu-south-2": 0.53438, "eu-west-2": 0.60298, "sa-east-1": 0.80742},
    "g6f.4xlarge": {"ap-northeast-2": 1.16812, "ap-southeast-2": 1.23517, "ca-central-1": 1.05482,
        "eu-north-1": 1.00758, "eu-south-2": 1.06875, "eu-west-2": 1.20595, "sa-east-1": 1.61483},
    "g6e.xlarge": {"ap-northeast-2": 2.288, "eu-north-1": 1.974, "eu-south-2": 1.961},
    "g6e.2xlarge": {"ap-northeast-2": 2.75652, "eu-north-1": 2.37822, "eu-south-2": 2.36256},
    "g6e.4xlarge": {"ap-northeast-2": 3.69355, "eu-north-1": 3.18666, "eu-south-2": 3.16567},
    "g6e.8xlarge": {"ap-northeast-2": 5.56762, "eu-north-1": 4.80353, "eu-south-2": 4.7719},
    "g6e.12xlarge": {"ap-northeast-2": 12.90014, "eu-north-1": 11.12975, "eu-south-2": 11.05645},
    "g6e.16xlarge": {"ap-northeast-2": 9.31575, "eu-north-1": 8.03728, "eu-south-2": 7.98435},
    "g6e.24xlarge": {"ap-northeast-2": 18.52234, "eu-north-1": 15.98037, "eu-south-2": 15.87513},
    "g6e.48xlarge": {"ap-northeast-2": 37.04468, "eu-north-1": 31.96075, "eu-south-2": 31.75027},
    "p3.2xlarge": {"ap-northeast-2": 4.234, "ap-southeast-2": 4.234, "ca-central-1": 3.366,
        "eu-west-2": 3.589},
    "p3.8xlarge": {"ap-northeast-2": 16.936, "ap-southeast-2": 16.936, "ca-central-1": 13.464,
        "eu-west-2": 14.356},
    "p3.16xlarge": {"ap-northeast-2": 33.872, "ap-southeast-2": 33.872, "ca-central-1": 26.928,
        "eu-west-2": 28.712},
    "p4d.24xlarge": {"ap-northeast-2": 30.41028, "ap-southeast-2": 28.54493,
        "ca-central-1": 25.25174, "eu-north-1": 23.71569, "eu-west-2": 28.54493,
        "sa-east-1": 35.5569},
    "p4de.24xlarge": {"il-central-1": 35.57346},
    "p5.4xlarge": {"ap-southeast-2": 8.944, "ap-southeast-3": 9.4944, "eu-west-2": 8.944,
        "sa-east-1": 11.5584},
    "p5.48xlarge": {"ap-northeast-2": 75.9552, "ap-southeast-2": 71.552, "ap-southeast-3": 75.9552,
        "ca-central-1": 63.296, "eu-north-1": 58.8928, "eu-west-2": 71.552, "sa-east-1": 92.4672,
        "us-west-1": 68.8},
    "p5en.48xlarge": {"ap-northeast-2": 87.34848, "ap-southeast-3": 87.34848,
        "eu-north-1": 67.72672, "eu-south-2": 68.35968, "me-central-1": 75.9552,
        "us-west-1": 79.12},
}

# p3 still has price-list rows everywhere in SIZES, but real 2026 offerings (moto's
# instance_type_offerings for us-east-1 / eu-west-1) no longer list p3 there: priced but not
# launchable -> absent from DescribeInstanceTypes / offerings / spot in those regions.
PRICED_NOT_OFFERED = {("p3.2xlarge", "us-east-1"), ("p3.8xlarge", "us-east-1"),
                      ("p3.16xlarge", "us-east-1"), ("p3.2xlarge", "eu-west-1"),
                      ("p3.8xlarge", "eu-west-1"), ("p3.16xlarge", "eu-west-1")}

# Which AZs offer a family.  us-east-1 is transcribed from real 2026 offerings
# (moto instance_type_offerings/availability-zone/us-east-1.json); elsewhere "n" = how many of
# the region's non-legacy AZs (chosen by a stable hash per family/region).
AZ_US_EAST_1 = {
    "g4dn": "abcdf", "g4ad": "abcd", "g5": "abcdf", "g5g": "abcd", "g6": "abcdf", "g6e": "abcd",
    "gr6": "abcd", "g6f": "abcd", "g7e": "ac", "p3": "", "p3dn": "cd", "p4d": "abcd",
    "p4de": "bc", "p5": "abcdef", "p5en": "ac", "p6-b200": "c", "g7": "acd", "gr6f": "ab",
}
AZ_COUNT = {"g4dn": 9, "g4ad": 2, "g5": 9, "g5g": 2, "g6": 9, "g6e": 3, "gr6": 2, "g6f": 2,
            "g7e": 2, "p3": 2, "p3dn": 1, "p4d": 2, "p4de": 1, "p5": 2, "p5e": 1, "p5en": 1,
            "p6-b200": 1, "g7": 2, "gr6f": 2, "p6-b300": 1}

# Non-GPU types: bulk CSV only (the adapter must filter them out).
NON_GPU = {
    "m5.large": dict(vcpu=2, mem_gib=8, family="General purpose", pp="Intel Xeon Platinum 8175",
                     clock="3.1 GHz", net="Up to 10 Gigabit", ebs="Up to 4750 Mbps", nsf="4",
                     ecu="10", od=(0.096, 0.096, 0.096, 0.107, 0.115, 0.124, 0.12, 0.101)),
    "c5.xlarge": dict(vcpu=4, mem_gib=8, family="Compute optimized", pp="Intel Xeon Platinum 8124M",
                      clock="3.4 GHz", net="Up to 10 Gigabit", ebs="Up to 4750 Mbps", nsf="8",
                      ecu="20", od=(0.17, 0.17, 0.17, 0.192, 0.194, 0.214, 0.196, 0.17)),
}

# Reserved terms: (offer term code, lease, purchase option, class, effective rate vs OD).
RESERVED_TERMS = [
    ("4NA7Y494T4", "1yr", "No Upfront", "standard", 0.630),
    ("HU7G6KETJZ", "1yr", "Partial Upfront", "standard", 0.600),
    ("6QCMYABX3D", "1yr", "All Upfront", "standard", 0.588),
    ("7NE97W5U4E", "1yr", "No Upfront", "convertible", 0.720),
    ("CUZHX8X6JH", "1yr", "Partial Upfront", "convertible", 0.686),
    ("VJWZNREJX2", "1yr", "All Upfront", "convertible", 0.672),
    ("BPH4J8HBKS", "3yr", "No Upfront", "standard", 0.440),
    ("38NPMPTW36", "3yr", "Partial Upfront", "standard", 0.410),
    ("NQ3QZPMQV9", "3yr", "All Upfront", "standard", 0.395),
    ("Z2E3P23VKM", "3yr", "No Upfront", "convertible", 0.530),
    ("R5XV2EPZQZ", "3yr", "Partial Upfront", "convertible", 0.500),
    ("MZU6U2429S", "3yr", "All Upfront", "convertible", 0.480),
]
# Families sold without Reserved Instances (capacity-block / savings-plan era types).
NO_RESERVED = {"p5e", "p5en", "p6-b200"}
# REAL effective Reserved rates (USD/h, Linux, shared tenancy) of a few types in us-east-1:
# instances.vantage.sh data as published in github.com/tsaol/aws-gpu data/gpu_instances_raw.json
# (commit 2d0108c, 2025-11-30), keyed "yrTerm<1|3><Standard|Convertible>.<payment>". A term absent
# there is absent here too (p5.48xlarge has no 1-year Standard term). How a Partial Upfront rate
# splits into fee and hourly part is not in that data: half and half, as ri_prices does.
REAL_RESERVED = {
    ("g4dn.xlarge", "us-east-1"): {
        "1S.no": 0.331, "1S.partial": 0.315763, "1S.all": 0.309247, "1C.no": 0.381, "1C.partial": 0.362507,
        "1C.all": 0.355708, "3S.no": 0.227, "3S.partial": 0.210213, "3S.all": 0.197793, "3C.no": 0.273,
        "3C.partial": 0.252256, "3C.all": 0.247412},
    ("g5.xlarge", "us-east-1"): {
        "1S.no": 0.63378, "1S.partial": 0.603626, "1S.all": 0.591553, "1C.no": 0.79223, "1C.partial": 0.754533,
        "1C.all": 0.739384, "3S.no": 0.43459, "3S.partial": 0.402418, "3S.all": 0.378272, "3C.no": 0.54324,
        "3C.partial": 0.502984, "3C.all": 0.492922},
    ("p5.48xlarge", "us-east-1"): {
        "1C.no": 43.344, "1C.partial": 41.279954, "1C.all": 40.454452, "3S.no": 23.77728,
        "3S.partial": 22.015991, "3S.all": 20.695053, "3C.no": 40.42138, "3C.partial": 37.427184,
        "3C.all": 36.678653},
}


def real_reserved_rate(t: str, region: str, lease: str, option: str, klass: str) -> float | None | bool:
    """The REAL effective rate of a term, None for a term the real data lacks, False without real data."""
    table = REAL_RESERVED.get((t, region))
    if table is None:
        return False
    key = f"{lease[0]}{klass[0].upper()}.{option.split()[0].lower()}"
    return table.get(key)

# EBS $/GB-month per region (us-east-1 list prices; others from AWS EBS pricing page values).
#            gp3     gp2    io2     io1    st1    sc1     standard snapshot
EBS_PRICES = {
    "us-east-1":      (0.08, 0.10, 0.125, 0.125, 0.045, 0.015, 0.05, 0.05),
    "us-east-2":      (0.08, 0.10, 0.125, 0.125, 0.045, 0.015, 0.05, 0.05),
    "us-west-2":      (0.08, 0.10, 0.125, 0.125, 0.045, 0.015, 0.05, 0.05),
    "eu-west-1":      (0.088, 0.11, 0.138, 0.138, 0.05, 0.0168, 0.055, 0.05),
    "eu-central-1":   (0.0952, 0.119, 0.149, 0.149, 0.054, 0.018, 0.059, 0.054),
    "ap-northeast-1": (0.096, 0.12, 0.142, 0.142, 0.054, 0.018, 0.08, 0.05),
    "ap-southeast-1": (0.096, 0.12, 0.138, 0.138, 0.054, 0.018, 0.08, 0.05),
    "ap-south-1":     (0.0912, 0.114, 0.131, 0.131, 0.051, 0.0174, 0.08, 0.05),
}

# Internet egress $/GB: first 10 TB, next 40 TB, next 100 TB, > 150 TB (after the 100 GB
# global free tier); inter-region $/GB from the region (us-east-1 <-> us-east-2 is 0.01).
EGRESS = {
    "us-east-1": (0.09, 0.085, 0.07, 0.05, 0.02),
    "us-east-2": (0.09, 0.085, 0.07, 0.05, 0.02),
    "us-west-2": (0.09, 0.085, 0.07, 0.05, 0.02),
    "eu-west-1": (0.09, 0.085, 0.07, 0.05, 0.02),
    "eu-central-1": (0.09, 0.085, 0.07, 0.05, 0.02),
    "ap-northeast-1": (0.114, 0.089, 0.086, 0.084, 0.09),
    "ap-southeast-1": (0.12, 0.085, 0.082, 0.08, 0.09),
    "ap-south-1": (0.1093, 0.085, 0.082, 0.08, 0.086),
}

# Spot Instance Advisor values for us-east-1 / eu-west-1 copied from the real feed sample
# (alexei-led/spotinfo spot-advisor-data.json): type -> (emr, cores, ram_gb,
#   use1 Linux (s, r), use1 Windows, euw1 Linux, euw1 Windows); None = not in the feed.
ADVISOR_REAL = {
    "g4ad.16xlarge": (False, 64, 256.0, (54, 0), (48, 0), (56, 0), (32, 0)),
    "g4ad.2xlarge": (False, 8, 32.0, (53, 0), (49, 0), (55, 0), (34, 1)),
    "g4ad.4xlarge": (False, 16, 64.0, (57, 0), (48, 1), (53, 0), (32, 0)),
    "g4ad.8xlarge": (False, 32, 128.0, (58, 0), (48, 0), (56, 0), (31, 0)),
    "g4ad.xlarge": (False, 4, 16.0, (67, 0), (60, 0), (54, 0), (38, 0)),
    "g4dn.12xlarge": (True, 48, 192.0, (64, 2), (58, 3), (56, 2), (37, 0)),
    "g4dn.16xlarge": (True, 64, 256.0, (76, 4), (53, 4), (57, 3), (34, 0)),
    "g4dn.2xlarge": (True, 8, 32.0, (61, 4), (60, 4), (55, 2), (39, 4)),
    "g4dn.4xlarge": (True, 16, 64.0, (68, 4), (55, 4), (56, 2), (36, 4)),
    "g4dn.8xlarge": (True, 32, 128.0, (63, 4), (54, 4), (56, 4), (35, 0)),
    "g4dn.metal": (False, 96, 384.0, (51, 4), (57, 0), (54, 2), (37, 0)),
    "g4dn.xlarge": (True, 4, 16.0, (64, 3), (67, 4), (54, 1), (42, 4)),
    "g5.12xlarge": (True, 48, 192.0, (58, 4), (65, 0), (56, 4), (42, 0)),
    "g5.16xlarge": (True, 64, 256.0, (61, 4), (52, 4), (55, 4), (33, 0)),
    "g5.24xlarge": (True, 96, 384.0, (57, 4), (58, 0), (56, 0), (38, 0)),
    "g5.2xlarge": (True, 8, 32.0, (58, 3), (69, 1), (54, 0), (43, 0)),
    "g5.48xlarge": (True, 192, 768.0, (71, 4), (58, 0), (57, 0), (37, 0)),
    "g5.4xlarge": (True, 16, 64.0, (60, 2), (62, 4), (56, 4), (40, 0)),
    "g5.8xlarge": (True, 32, 128.0, (59, 4), (56, 4), (55, 3), (36, 0)),
    "g5.xlarge": (True, 4, 16.0, (59, 4), (76, 4), (56, 2), (47, 1)),
    "g5g.16xlarge": (False, 64, 128.0, (78, 1), None, None, None),
    "g5g.2xlarge": (False, 8, 16.0, (48, 1), None, None, None),
    "g5g.4xlarge": (False, 16, 32.0, (63, 0), None, None, None),
    "g5g.8xlarge": (False, 32, 64.0, (58, 2), None, None, None),
    "g5g.xlarge": (False, 4, 8.0, (67, 0), None, None, None),
    "g6.12xlarge": (True, 48, 192.0, (59, 4), (61, 3), None, None),
    "g6.16xlarge": (True, 64, 256.0, (64, 3), (46, 4), None, None),
    "g6.24xlarge": (True, 96, 384.0, (56, 4), (54, 2), None, None),
    "g6.2xlarge": (True, 8, 32.0, (58, 4), (65, 4), None, None),
    "g6.48xlarge": (True, 192, 768.0, (69, 4), (54, 2), None, None),
    "g6.4xlarge": (True, 16, 64.0, (57, 4), (58, 4), None, None),
    "g6.8xlarge": (True, 32, 128.0, (56, 4), (51, 4), None, None),
    "g6.xlarge": (True, 4, 16.0, (49, 4), (73, 0), None, None),
    "g6e.12xlarge": (True, 48, 384.0, (56, 4), (73, 1), None, None),
    "g6e.16xlarge": (True, 64, 512.0, (66, 3), (59, 4), None, None),
    "g6e.24xlarge": (True, 96, 768.0, (74, 4), (68, 4), None, None),
    "g6e.2xlarge": (True, 8, 64.0, (63, 2), (76, 2), None, None),
    "g6e.48xlarge": (True, 192, 1536.0, (68, 4), (69, 4), None, None),
    "g6e.4xlarge": (True, 16, 128.0, (62, 4), (67, 4), None, None),
    "g6e.8xlarge": (True, 32, 256.0, (66, 4), (68, 4), None, None),
    "g6e.xlarge": (True, 4, 32.0, (58, 1), (80, 3), None, None),
    "gr6.4xlarge": (True, 16, 128.0, (57, 4), (50, 4), None, None),
    "gr6.8xlarge": (True, 32, 256.0, (59, 3), (56, 4), None, None),
    "p3.16xlarge": (True, 64, 488.0, (83, 4), (74, 4), (55, 4), (49, 4)),
    "p3.2xlarge": (True, 8, 61.0, (80, 4), (80, 4), (56, 4), (49, 4)),
    "p3.8xlarge": (True, 32, 244.0, (86, 4), (79, 4), (54, 4), (50, 4)),
    "p3dn.24xlarge": (False, 96, 768.0, (87, 4), (79, 4), (51, 4), (44, 4)),
    "p4d.24xlarge": (True, 96, 1152.0, (67, 2), None, (34, 4), None),
    "p4de.24xlarge": (False, 96, 1152.0, (65, 0), None, None, None),
    "p5.48xlarge": (True, 192, 2048.0, (52, 4), None, None, None),
    "p5en.48xlarge": (False, 192, 2048.0, (64, 0), None, None, None),
    "m5.large": (False, 2, 8.0, (66, 3), (46, 4), (57, 1), (29, 4)),
    "m5.xlarge": (True, 4, 16.0, (66, 4), (46, 1), (56, 2), (30, 1)),
    "c5.large": (False, 2, 4.0, (59, 0), (43, 4), (54, 0), (29, 4)),
    "c5.xlarge": (True, 4, 8.0, (56, 0), (43, 3), (51, 0), (29, 4)),
    "r5.large": (False, 2, 16.0, (60, 0), (52, 3), (55, 1), (34, 4)),
    "t3.micro": (False, 2, 1.0, (69, 0), (48, 0), (55, 1), (31, 1)),
    "t3.medium": (False, 2, 4.0, (56, 0), (62, 2), (56, 0), (40, 2)),
    "m6i.large": (False, 2, 8.0, (63, 2), (46, 4), (54, 0), (29, 2)),
    "c6i.xlarge": (True, 4, 8.0, (60, 3), (43, 0), (56, 2), (28, 4)),
    "m7i.large": (False, 2, 8.0, (68, 3), (47, 4), (54, 2), (31, 3)),
    "c7g.xlarge": (True, 4, 8.0, (62, 0), None, (52, 0), None),
    "r6g.large": (False, 2, 16.0, (70, 3), None, (55, 3), None),
}
ADVISOR_RANGES = [
    {"index": 0, "label": "<5%", "dots": 0, "max": 5},
    {"index": 1, "label": "5-10%", "dots": 1, "max": 11},
    {"index": 2, "label": "10-15%", "dots": 2, "max": 16},
    {"index": 3, "label": "15-20%", "dots": 3, "max": 22},
    {"index": 4, "label": ">20%", "dots": 4, "max": 100},
]

# Page sizes (every paginated call has >= 2 pages in every region).
PAGE_DESCRIBE_TYPES = 10
PAGE_OFFERINGS_MAX = 60
PAGE_SPOT_MAX = 100
# Series whose DescribeSpotPriceHistory answer carries 30+ days of changes (spot_history): region
# -> GPU types. Every other (type, AZ) answers its current price only. The answer of a region
# with history comes in pages of PAGE_SPOT_HISTORY (the adapter asks MaxResults=1000).
HISTORY_SERIES = {
    "us-east-1": ("p5.48xlarge", "p4d.24xlarge", "p5en.48xlarge", "g6e.xlarge"),
    "us-west-2": ("p5.48xlarge", "g5.xlarge"),
}
HISTORY_START = dt.datetime(2026, 10, 31, 3, 0, 0, tzinfo=dt.timezone.utc)  # RECORDED_AT - 30 days
PAGE_SPOT_HISTORY = 1000
# Capacity Blocks for ML: the regions whose DescribeCapacityBlockOfferings answers are recorded
# (the manifest's `aws_capacity_blocks` setting names them), the durations the adapter asks, and
# the start days offered (days after RECORDED_AT; blocks start at 11:30 UTC).
CAPACITY_BLOCK_REGIONS = ("us-east-1",)
CAPACITY_BLOCK_HOURS = (24, 72, 168, 336)
CAPACITY_BLOCK_START_DAYS = (1, 4, 8, 9, 15)
SETTINGS = {"aws_price_source": "bulk", "aws_capacity_blocks": ",".join(CAPACITY_BLOCK_REGIONS)}
# Savings Plans price list (savingsPlan/v1.0/aws/AWSComputeSavingsPlan): its version and
# publication, and the rate of each plan as a share of the Linux on-demand price. MADE UP: AWS's
# Savings Plans pricing page shows rates only in its interactive calculator, which no stored
# source captured; the shares are of the size AWS states ("up to 66%" off for Compute, "up to
# 72%" for EC2 Instance Savings Plans), deeper for 3 years and more upfront. Keyed
# (productFamily, years, purchase option).
SP_VERSION = "20261124183551"
SP_PUBLICATION = "2026-11-24T18:35:51Z"
SP_EFFECTIVE = "2026-11-24T00:00:00Z"
SP_SHARE = {
    ("ComputeSavingsPlans", 1, "No Upfront"): 0.75, ("ComputeSavingsPlans", 1, "Partial Upfront"): 0.73,
    ("ComputeSavingsPlans", 1, "All Upfront"): 0.72, ("ComputeSavingsPlans", 3, "No Upfront"): 0.55,
    ("ComputeSavingsPlans", 3, "Partial Upfront"): 0.52, ("ComputeSavingsPlans", 3, "All Upfront"): 0.50,
    ("EC2InstanceSavingsPlans", 1, "No Upfront"): 0.66, ("EC2InstanceSavingsPlans", 1, "Partial Upfront"): 0.64,
    ("EC2InstanceSavingsPlans", 1, "All Upfront"): 0.63, ("EC2InstanceSavingsPlans", 3, "No Upfront"): 0.45,
    ("EC2InstanceSavingsPlans", 3, "Partial Upfront"): 0.42, ("EC2InstanceSavingsPlans", 3, "All Upfront"): 0.40,
}
PAGE_GP_GPU = 8
PAGE_GP_STORAGE = 4
PAGE_GP_TRANSFER = 6

# =====================================================================================
# ==== BUILD
# =====================================================================================

EC2_NS = "http://ec2.amazonaws.com/doc/2016-11-15/"
CSV_EC2_HEADER = [
    "SKU", "OfferTermCode", "RateCode", "TermType", "PriceDescription", "EffectiveDate",
    "StartingRange", "EndingRange", "Unit", "PricePerUnit", "Currency", "RelatedTo",
    "LeaseContractLength", "PurchaseOption", "OfferingClass", "Product Family", "serviceCode",
    "Location", "Location Type", "Instance Type", "Current Generation", "Instance Family", "vCPU",
    "Physical Processor", "Clock Speed", "Memory", "Storage", "Network Performance",
    "Processor Architecture", "Storage Media", "Volume Type", "Max Volume Size", "Max IOPS/volume",
    "Max IOPS Burst Performance", "Max throughput/volume", "Provisioned", "Tenancy",
    "EBS Optimized", "Operating System", "License Model", "Group", "Group Description",
    "Transfer Type", "From Location", "From Location Type", "To Location", "To Location Type",
    "usageType", "operation", "AvailabilityZone", "CapacityStatus", "ClassicNetworkingSupport",
    "Dedicated EBS Throughput", "ECU", "Elastic Graphics Type", "Enhanced Networking Supported",
    "From Region Code", "GPU", "GPU Memory", "Instance", "Instance Capacity - 10xlarge",
    "Instance Capacity - 12xlarge", "Instance Capacity - 16xlarge", "Instance Capacity - 18xlarge",
    "Instance Capacity - 24xlarge", "Instance Capacity - 2xlarge", "Instance Capacity - 32xlarge",
    "Instance Capacity - 4xlarge", "Instance Capacity - 8xlarge", "Instance Capacity - 9xlarge",
    "Instance Capacity - large", "Instance Capacity - medium", "Instance Capacity - metal",
    "Instance Capacity - xlarge", "instanceSKU", "Intel AVX2 Available", "Intel AVX Available",
    "Intel Turbo Available", "MarketOption", "Normalization Size Factor", "Physical Cores",
    "Pre Installed S/W", "Processor Features", "Product Type", "Region Code", "Resource Type",
    "serviceName", "SnapshotArchiveFeeType", "To Region Code", "Volume API Name",
    "VPCNetworkingSupport",
]
assert len(CSV_EC2_HEADER) == 91
# AWSDataTransfer CSV columns: layout reconstructed from the column list that
# github.com/Bjorn248/graphql_aws_pricing_api (SCHEMATA.md) derived from the real CSV header,
# mapped back to the AmazonEC2 header's spelling of the same columns.
CSV_DT_HEADER = [
    "SKU", "OfferTermCode", "RateCode", "TermType", "PriceDescription", "EffectiveDate",
    "StartingRange", "EndingRange", "Unit", "PricePerUnit", "Currency", "RelatedTo",
    "Product Family", "serviceCode", "Transfer Type", "From Location", "From Location Type",
    "To Location", "To Location Type", "usageType", "operation", "From Region Code",
    "serviceName", "To Region Code",
]
OD_TERM = "JRTCKXETXF"
RATE_HOURLY = "6YS6EN2CT7"
RATE_UPFRONT = "2TG2D8R56U"


# ---------------------------------------------------------------- deterministic helpers
def h(*parts) -> int:
    return int.from_bytes(hashlib.sha256("|".join(map(str, parts)).encode()).digest()[:8], "big")


def code(n: int, *parts) -> str:
    alphabet = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"
    x = int.from_bytes(hashlib.sha256(("code|" + "|".join(map(str, parts))).encode()).digest(), "big")
    out = []
    for _ in range(n):
        x, r = divmod(x, len(alphabet))
        out.append(alphabet[r])
    return "".join(out)


def sku(*parts) -> str:
    return code(16, "sku", *parts)


def uuid_like(*parts) -> str:
    x = hashlib.sha256(("uuid|" + "|".join(map(str, parts))).encode()).hexdigest()
    return f"{x[:8]}-{x[8:12]}-4{x[13:16]}-{'89ab'[int(x[16], 16) % 4]}{x[17:20]}-{x[20:32]}"


def ec2_token(*parts) -> str:
    raw = hashlib.sha256(("tok|" + "|".join(map(str, parts))).encode()).digest()
    raw += hashlib.sha256(raw).digest()[:12]
    return "AAEAA" + base64.b64encode(raw).decode().rstrip("=")


def pricing_token(*parts) -> str:
    a = hashlib.sha256(("pt1|" + "|".join(map(str, parts))).encode()).digest()[:16]
    b = hashlib.sha256(("pt2|" + "|".join(map(str, parts))).encode()).digest()
    b = (b * 4)[:96]
    return base64.b64encode(a).decode() + ":" + base64.b64encode(b).decode()


def frac(*parts) -> float:
    """Stable pseudo-random number in [0, 1)."""
    return (h(*parts) % 1_000_000) / 1_000_000


def p10(x: float) -> str:
    """PricePerUnit as the price list writes it: 10 decimals."""
    return f"{x:.10f}"


def pdesc(x: float) -> str:
    """Price as written in a PriceDescription ("$1.006", "$21.30264", "$0.10", "$0.00")."""
    s = f"{x:.6f}".rstrip("0")
    whole, dec = s.split(".")
    return f"{whole}.{dec:0<2}"


def family_of(t: str) -> str:
    return t.split(".")[0]


def size_of(t: str) -> str:
    return t.split(".", 1)[1]


def od_price(t: str, region: str):
    if region in MORE_REGIONS:   # GPU rows only there
        return OD_MORE_REGIONS.get(t, {}).get(region)
    spec = SIZES.get(t) or NON_GPU.get(t)
    return spec["od"][REGION_ORDER.index(region)]


def types_priced(region: str) -> list[str]:
    return [t for t in SIZES if od_price(t, region) is not None]


def ec2_only(region: str) -> list[str]:
    return [t for t, regions in EC2_ONLY.items() if region in regions]


def types_offered(region: str) -> list[str]:
    return [t for t in types_priced(region) if (t, region) not in PRICED_NOT_OFFERED] + ec2_only(region)


# ---------------------------------------------------------------- DescribeInstanceTypes
def valid_cores(rule, cores):
    if rule == "even":
        return list(range(2, cores + 1, 2)) if cores >= 2 else [1]
    if rule == "all":
        return list(range(1, cores + 1))
    if rule == "p3dn":
        return list(range(4, cores + 1, 2))
    if rule == "pow2":
        return [2 ** i for i in range(1, cores.bit_length()) if 2 ** i <= cores]
    return None


def gpu_total(t: str) -> int:
    s, f = SIZES[t], FAMILIES[family_of(t)]
    if f["total"] == "part":
        return s["gpu_mib"]
    n = s["gpus"] if s["gpus"] else 1
    return n * f["gpu"][2]


def instance_type_info(t: str) -> dict:
    s, f = SIZES[t], FAMILIES[family_of(t)]
    metal = s.get("metal", False)
    gname, gman, gmib, workloads = f["gpu"]
    if "part" in s:   # partitioned: Count 0, one logical GPU of a fraction
        gpu = {"Name": gname, "Manufacturer": gman, "Count": 0, "LogicalGpuCount": 1,
               "GpuPartitionSize": s["part"], "Workloads": list(workloads),
               "MemoryInfo": {"SizeInMiB": s.get("gpu_mib", gmib)}}
    else:
        gpu = {"Name": gname, "Manufacturer": gman, "Count": s["gpus"],
               "LogicalGpuCount": s["gpus"], "GpuPartitionSize": 1.0,
               "Workloads": list(workloads), "MemoryInfo": {"SizeInMiB": gmib}}
    vcpu = {"DefaultVCpus": s["vcpu"], "DefaultCores": s["cores"],
            "DefaultThreadsPerCore": s["vcpu"] // s["cores"]}
    vc = valid_cores(f["vc"], s["cores"]) if not metal else None
    if vc:
        vcpu["ValidCores"] = vc
    if f["tpc"] and not metal:
        vcpu["ValidThreadsPerCore"] = list(f["tpc"])
    b_mbps, b_iops, b_tp, m_mbps, m_iops, m_tp = s["ebs"]
    ebs = {"EbsOptimizedSupport": "default", "EncryptionSupport": "supported",
           "EbsOptimizedInfo": {"BaselineBandwidthInMbps": b_mbps, "BaselineThroughputInMBps": b_tp,
                                "BaselineIops": b_iops, "MaximumBandwidthInMbps": m_mbps,
                                "MaximumThroughputInMBps": m_tp, "MaximumIops": m_iops},
           "NvmeSupport": "required" if f["hyper"] != "xen" else "unsupported"}
    if s["att"]:
        ebs["MaximumEbsAttachments"] = s["att"][1]
        ebs["AttachmentLimitType"] = s["att"][0]
    max_eni, ipv4, ipv6 = s["eni"]
    perf, ncards, cperf, cbase, cpeak, queues = s["net"]
    cards = []
    for i in range(ncards):
        card = {"NetworkCardIndex": i, "NetworkPerformance": cperf,
                "MaximumNetworkInterfaces": max_eni if ncards == 1 else max(2, max_eni // ncards),
                "BaselineBandwidthInGbps": cbase, "PeakBandwidthInGbps": cpeak}
        if queues:
            card["DefaultEnaQueueCountPerInterface"] = queues
        cards.append(card)
    net = {"NetworkPerformance": perf, "MaximumNetworkInterfaces": max_eni,
           "MaximumNetworkCards": ncards, "DefaultNetworkCardIndex": 0, "NetworkCards": cards,
           "Ipv4AddressesPerInterface": ipv4, "Ipv6AddressesPerInterface": ipv6,
           "Ipv6Supported": True, "EnaSupport": f["ena"], "EfaSupported": bool(s["efa"])}
    if s["efa"]:
        net["EfaInfo"] = {"MaximumEfaInterfaces": s["efa"]}
    net["EncryptionInTransitSupported"] = f["eit"]
    net["EnaSrdSupported"] = bool(f.get("srd", False))
    if f["hyper"] != "xen":
        net["FlexibleEnaQueuesSupport"] = "unsupported"
        net["ConnectionTrackingConfiguration"] = {"DefaultTcpEstablishedTimeout": 432000,
                                                  "DefaultUdpTimeout": 30,
                                                  "DefaultUdpStreamTimeout": 180}
        net["SecondaryNetworkSupported"] = False
    info = {
        "InstanceType": t,
        "CurrentGeneration": f.get("current", True),
        "FreeTierEligible": False,
        "SupportedUsageClasses": list(f["usage"]),
        "SupportedRootDeviceTypes": ["ebs"],
        "SupportedVirtualizationTypes": ["hvm"],
        "BareMetal": metal,
    }
    if not metal:
        info["Hypervisor"] = f["hyper"]
    info["ProcessorInfo"] = {"SupportedArchitectures": [f["cpu"][1]],
                             "SustainedClockSpeedInGhz": f["cpu"][2], "Manufacturer": f["cpu"][0]}
    info["VCpuInfo"] = vcpu
    info["MemoryInfo"] = {"SizeInMiB": s["mem"]}
    info["InstanceStorageSupported"] = bool(s["disk"])
    if s["disk"]:
        n, gb = s["disk"]
        info["InstanceStorageInfo"] = {"TotalSizeInGB": n * gb,
                                       "Disks": [{"SizeInGB": gb, "Count": n, "Type": "ssd"}],
                                       "NvmeSupport": "required", "EncryptionSupport": "required"}
    info["EbsInfo"] = ebs
    info["NetworkInfo"] = net
    info["GpuInfo"] = {"Gpus": [gpu], "TotalGpuMemoryInMiB": gpu_total(t)}
    info["PlacementGroupInfo"] = {"SupportedStrategies": ["cluster", "partition", "spread"]}
    info["HibernationSupported"] = False
    info["BurstablePerformanceSupported"] = False
    info["DedicatedHostsSupported"] = s.get("dh", f["dh"])
    info["AutoRecoverySupported"] = False if metal else f["ar"]
    info["SupportedBootModes"] = ["legacy-bios"] if metal else list(f["boot"])
    info["NitroEnclavesSupport"] = "unsupported" if metal else f["enclaves"]
    tpm = f["tpm"] and not metal
    info["NitroTpmSupport"] = "supported" if tpm else "unsupported"
    if tpm:
        info["NitroTpmInfo"] = {"SupportedVersions": ["2.0"]}
    info["PhcSupport"] = "unsupported"
    info["RebootMigrationSupport"] = f["rm"]
    info["SupportedInRegion"] = True
    return info


# ---------------------------------------------------------------- AZ offerings & spot
def azs_for(t: str, region: str) -> list[str]:
    if (t, region) in PRICED_NOT_OFFERED or (od_price(t, region) is None and t not in ec2_only(region)):
        return []
    fam = family_of(t)
    r = REGIONS[region]
    if region == "us-east-1":
        letters = AZ_US_EAST_1[fam]
        return [f"us-east-1{c}" for c in letters]
    names = [a for a, _ in r["azs"] if a not in r["legacy"]]
    ranked = sorted(names, key=lambda a: h("az", fam, region, a))
    n = min(AZ_COUNT[fam], len(ranked))
    chosen = set(ranked[:n])
    return [a for a in names if a in chosen]


def az_id(region: str, az: str) -> str:
    return dict(REGIONS[region]["azs"])[az]


def spot_price(t: str, region: str, az: str):
    ratio = FAMILIES[family_of(t)]["spot"]
    if ratio is None:
        return None
    ratio = ratio * (1 + (frac("spot-type", t, region) - 0.5) * 0.10)   # +-5% per type/region
    ratio = ratio * (1 + (frac("spot-az", t, az) - 0.5) * 0.12)         # +-6% per AZ
    ratio = min(0.70, max(0.30, ratio))
    return round(od_price(t, region) * ratio, 4)


def spot_timestamp(t: str, az: str) -> dt.datetime:
    base = dt.datetime(2026, 11, 29, 0, 0, 0, tzinfo=dt.timezone.utc)
    secs = h("ts", t, az) % (27 * 3600)     # 2026-11-29T00:00:00Z .. 2026-11-30T02:59:59Z
    return base + dt.timedelta(seconds=secs)


def spot_history(t: str, region: str, az: str) -> list[tuple[float, dt.datetime]]:
    """(price, timestamp) of every spot price change of a HISTORY_SERIES type in one AZ, newest
    first: the newest is the current (spot_price, spot_timestamp); walking back, each change comes
    3 to 40 hours before the next one and moves the price by up to +-4 % (a rare +18..30 % spike
    held for a few hours), pulled back toward the current level, kept within 30-90 % of on-demand.
    The oldest change is the first one at or before HISTORY_START: the price in effect then, which
    is what AWS returns first for a StartTime of HISTORY_START."""
    price, stamp = spot_price(t, region, az), spot_timestamp(t, az)
    level, od = price, od_price(t, region)
    out = [(price, stamp)]
    k = 0
    while stamp > HISTORY_START:
        k += 1
        gap = 3 * 3600 + h("gap", t, az, k) % (37 * 3600)
        stamp = stamp - dt.timedelta(seconds=gap)
        if frac("spike", t, az, k) < 0.04:
            moved = price * (1.18 + 0.12 * frac("spike-size", t, az, k))
        else:
            step = (frac("step", t, az, k) - 0.5) * 0.08
            moved = price * (1 + step) + (level - price) * 0.2
        price = round(min(0.90 * od, max(0.30 * od, moved)), 4)
        out.append((price, stamp))
    return out


def capacity_block_offerings(t: str, region: str, hours: int) -> list[dict]:
    """The offerings of one type and duration: each start day in one or two of the type's AZs,
    one instance each, for an upfront fee of a made-up hourly rate (57 % of on-demand, +-8 % by
    start day) times the duration."""
    out = []
    azs = azs_for(t, region)
    for day in CAPACITY_BLOCK_START_DAYS:
        start = dt.datetime(2026, 11, 30, 11, 30, tzinfo=dt.timezone.utc) + dt.timedelta(days=day - 1)
        chosen = sorted(azs, key=lambda a: h("cb-az", t, a, day, hours))[:1 + h("cb-n", t, day, hours) % 2]
        for a in sorted(chosen):
            rate = od_price(t, region) * 0.57 * (1 + (frac("cb-rate", t, day, a) - 0.5) * 0.16)
            out.append({
                "CapacityBlockOfferingId": f"cb-{h('cb', t, a, day, hours):017x}",
                "InstanceType": t, "AvailabilityZone": a, "InstanceCount": 1,
                "StartDate": start, "EndDate": start + dt.timedelta(hours=hours),
                "CapacityBlockDurationHours": hours, "UpfrontFee": f"{round(rate * hours, 2):.2f}",
                "CurrencyCode": "USD", "Tenancy": "default"})
    return out


# ---------------------------------------------------------------- XML (EC2 Query API)
def _xml_scalar(shape, value) -> str:
    tn = shape.type_name
    if tn == "boolean":
        return "true" if value else "false"
    if tn == "timestamp":
        return value.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.000Z")
    if tn in ("double", "float"):
        return repr(float(value))
    return xml_escape(str(value))


def _xml_node(shape, value, name, indent, lines):
    pad = "    " * indent
    tn = shape.type_name
    if tn == "structure":
        children = []
        for mname, mshape in shape.members.items():
            if mname in value and value[mname] is not None:
                _xml_node(mshape, value[mname], mshape.serialization.get("name", mname),
                          indent + 1, children)
        unknown = set(value) - set(shape.members)
        if unknown:
            raise KeyError(f"{shape.name}: keys not in the botocore model: {sorted(unknown)}")
        if children:
            lines.append(f"{pad}<{name}>")
            lines.extend(children)
            lines.append(f"{pad}</{name}>")
        else:
            lines.append(f"{pad}<{name}/>")
    elif tn == "list":
        if not value:
            lines.append(f"{pad}<{name}/>")
            return
        lines.append(f"{pad}<{name}>")
        item_name = shape.member.serialization.get("name", "item")
        for item in value:
            _xml_node(shape.member, item, item_name, indent + 1, lines)
        lines.append(f"{pad}</{name}>")
    else:
        text = _xml_scalar(shape, value)
        lines.append(f"{pad}<{name}>{text}</{name}>" if text != "" else f"{pad}<{name}></{name}>")


def ec2_xml(operation: str, body: dict, request_id: str) -> bytes:
    model = _ec2_model().operation_model(operation)
    out = model.output_shape
    lines = ['<?xml version="1.0" encoding="UTF-8"?>',
             f'<{operation}Response xmlns="{EC2_NS}">', f"    <requestId>{request_id}</requestId>"]
    # members in model order, except that EC2 writes <nextToken> after the result set
    names = [m for m in out.members if m != "NextToken"] + (["NextToken"] if "NextToken" in out.members else [])
    for mname in names:
        mshape = out.members[mname]
        if mname in body:
            _xml_node(mshape, body[mname], mshape.serialization.get("name", mname), 1, lines)
    unknown = set(body) - set(out.members)
    if unknown:
        raise KeyError(f"{operation}: keys not in output shape: {unknown}")
    lines.append(f"</{operation}Response>")
    return ("\n".join(lines) + "\n").encode()


_MODELS = {}


def _ec2_model():
    if "ec2" not in _MODELS:
        import botocore.session
        _MODELS["ec2"] = botocore.session.get_session().get_service_model("ec2")
    return _MODELS["ec2"]


def _pricing_model():
    if "pricing" not in _MODELS:
        import botocore.session
        _MODELS["pricing"] = botocore.session.get_session().get_service_model("pricing")
    return _MODELS["pricing"]


# ---------------------------------------------------------------- pricing attributes
def mem_str(mib: int) -> str:
    gib = mib / 1024
    return f"{gib:g} GiB"


def storage_str(t: str) -> str:
    d = SIZES[t]["disk"]
    if not d:
        return "EBS only"
    n, gb = d
    return f"{n} x {gb} NVMe SSD" if gb < 1000 else f"{n} x {gb} GB NVMe SSD"


def ebs_tp_str(t: str) -> str:
    b, _, _, m, _, _ = SIZES[t]["ebs"]
    return f"{m} Mbps" if b == m else f"Up to {m} Mbps"


def nsf(t: str) -> str:
    size = size_of(t)
    if size == "metal":
        return str(SIZES[t]["vcpu"] * 2)
    if size == "large":
        return "4"
    if size == "xlarge":
        return "8"
    return str(int(size.replace("xlarge", "")) * 8)


def gpu_attr(t: str) -> tuple[str, str]:
    s, f = SIZES[t], FAMILIES[family_of(t)]
    if "part" in s and s["part"] < 1:
        frac_s = f"{s['part']:g}"
        return frac_s, f"{round(f['gb'] * s['part'])} GB"
    n = s.get("price_gpus", s["gpus"])
    return str(n), f"{n * f['gb']} GB"


def compute_product(t: str, region: str) -> dict:
    """CSV column -> value for the product part (no term columns) of a GPU or non-GPU type."""
    r = REGIONS[region]
    row = {"Product Family": "Compute Instance", "serviceCode": "AmazonEC2",
           "Location": r["name"], "Location Type": "AWS Region", "Instance Type": t,
           "Current Generation": "Yes", "Processor Architecture": "64-bit",
           "AvailabilityZone": "NA", "ClassicNetworkingSupport": "false",
           "Enhanced Networking Supported": "Yes", "MarketOption": "OnDemand",
           "Region Code": region, "serviceName": "Amazon Elastic Compute Cloud",
           "VPCNetworkingSupport": "true"}
    if t in NON_GPU:
        n = NON_GPU[t]
        row.update({"Instance Family": n["family"], "vCPU": str(n["vcpu"]),
                    "Physical Processor": n["pp"], "Clock Speed": n["clock"],
                    "Memory": f"{n['mem_gib']} GiB", "Storage": "EBS only",
                    "Network Performance": n["net"], "Dedicated EBS Throughput": n["ebs"],
                    "ECU": n["ecu"], "GPU Memory": "NA", "Intel AVX2 Available": "Yes",
                    "Intel AVX Available": "Yes", "Intel Turbo Available": "Yes",
                    "Normalization Size Factor": n["nsf"],
                    "Processor Features": "Intel AVX; Intel AVX2; Intel AVX512; Intel Turbo"})
        return row
    s, f = SIZES[t], FAMILIES[family_of(t)]
    gpu, gmem = gpu_attr(t)
    yes = "Yes" if f["intel"] else "No"
    row.update({
        "Product Family": "Compute Instance (bare metal)" if s.get("metal") else "Compute Instance",
        "Instance Family": "GPU instance", "vCPU": str(s["vcpu"]), "Physical Processor": f["pp"],
        "Clock Speed": f["clock"], "Memory": mem_str(s["mem"]), "Storage": storage_str(t),
        "Network Performance": s["net"][0], "Dedicated EBS Throughput": ebs_tp_str(t),
        "ECU": s.get("ecu", "NA"), "GPU": gpu, "GPU Memory": gmem,
        "Intel AVX2 Available": yes, "Intel AVX Available": yes, "Intel Turbo Available": yes,
        "Normalization Size Factor": nsf(t), "Processor Features": f["feat"],
    })
    return row


# Variants of a compute product in the bulk file: (key, OS, license, pre-installed SW,
# tenancy, capacity status, usage-type stem, operation, description words, price function,
# has reserved terms)
def _variants(t: str):
    vcpu = (SIZES.get(t) or NON_GPU.get(t))["vcpu"]
    fam = family_of(t)
    arm = t in SIZES and FAMILIES[fam]["cpu"][1] == "arm64"
    ri = fam not in NO_RESERVED
    v = [
        ("linux", "Linux", "NA", "Shared", "Used", "BoxUsage", "RunInstances",
         "On Demand Linux", lambda p: p, ri),
        ("rhel", "RHEL", "NA", "Shared", "Used", "BoxUsage", "RunInstances:0010",
         "On Demand RHEL", lambda p: p + 0.0144 * vcpu, False),
        ("suse", "SUSE", "NA", "Shared", "Used", "BoxUsage", "RunInstances:000g",
         "On Demand SUSE", lambda p: p + 0.125, False),
        ("linux-ded", "Linux", "NA", "Dedicated", "Used", "DedicatedUsage", "RunInstances",
         "Dedicated Linux", lambda p: p * 1.1, False),
        ("linux-host", "Linux", "NA", "Host", "Used", "HostBoxUsage", "RunInstances",
         None, lambda p: 0.0, False),
        ("linux-unused", "Linux", "NA", "Shared", "UnusedCapacityReservation", "UnusedBox",
         "RunInstances", "Unused Reservation Linux", lambda p: p, False),
        ("linux-alloc", "Linux", "NA", "Shared", "AllocatedCapacityReservation", "Reservation",
         "RunInstances", "Reservation Linux", lambda p: 0.0, False),
    ]
    if not arm:
        v += [
            ("windows", "Windows", "NA", "Shared", "Used", "BoxUsage", "RunInstances:0002",
             "On Demand Windows", lambda p: p + 0.046 * vcpu, ri),
            ("linux-sqlstd", "Linux", "SQL Std", "Shared", "Used", "BoxUsage", "RunInstances:0004",
             "On Demand Linux with SQL Std", lambda p: p + 0.12 * vcpu, False),
        ]
    return v


def ri_prices(od: float, rate: float, lease: str, option: str):
    hours = 8760 if lease == "1yr" else 26280
    eff = od * rate
    if option == "No Upfront":
        return round(eff, 5), None
    if option == "Partial Upfront":
        return round(eff / 2, 5), round(eff / 2 * hours)
    return 0.0, round(eff * hours)


def ec2_compute_rows(t: str, region: str, products: dict) -> list[dict]:
    """All bulk-CSV rows of one instance type in one region; fills products[key] for JSON."""
    r = REGIONS[region]
    base = compute_product(t, region)
    od = od_price(t, region)
    rows = []
    for key, os_, sw, ten, cap, stem, op, words, pf, has_ri in _variants(t):
        s_ = sku(region, t, os_, sw, ten, cap)
        prod = dict(base)
        prod.update({"Tenancy": ten, "Operating System": os_, "License Model": "No License required",
                     "usageType": f"{r['prefix']}{stem}:{t}", "operation": op,
                     "CapacityStatus": cap, "Pre Installed S/W": sw})
        if cap != "Used":
            prod["instanceSKU"] = sku(region, t, os_, sw, ten, "Used")
        price = pf(od)
        if ten == "Host":
            d = f"${pdesc(price)} per {os_} {t} Dedicated Host Instance hour"
        else:
            d = f"${pdesc(price)} per {words} {t} Instance Hour"
        rows.append(dict(prod, **{"SKU": s_, "OfferTermCode": OD_TERM,
                                  "RateCode": f"{s_}.{OD_TERM}.{RATE_HOURLY}", "TermType": "OnDemand",
                                  "PriceDescription": d, "EffectiveDate": OD_EFFECTIVE,
                                  "StartingRange": "0", "EndingRange": "Inf", "Unit": "Hrs",
                                  "PricePerUnit": p10(price), "Currency": "USD"}))
        reserved = []
        if has_ri:
            ri_os = "Linux/UNIX" if os_ == "Linux" else "Windows"
            for term, lease, option, klass, rate in RESERVED_TERMS:
                real = real_reserved_rate(t, region, lease, option, klass) if os_ == "Linux" else False
                if real is None:
                    continue
                hourly, upfront = ri_prices(price, rate, lease, option) if real is False else \
                    ri_prices(1.0, real, lease, option)
                applied = f"{ri_os} (Amazon VPC), {t} reserved instance applied"
                hd = f"USD 0.0 per {applied}" if option == "All Upfront" else applied
                common = {"OfferTermCode": term, "TermType": "Reserved", "EffectiveDate": RI_EFFECTIVE,
                          "Currency": "USD", "LeaseContractLength": lease, "PurchaseOption": option,
                          "OfferingClass": klass, "SKU": s_}
                rows.append(dict(prod, **common, **{
                    "RateCode": f"{s_}.{term}.{RATE_HOURLY}", "PriceDescription": hd,
                    "StartingRange": "0", "EndingRange": "Inf", "Unit": "Hrs",
                    "PricePerUnit": p10(hourly)}))
                if upfront is not None:
                    rows.append(dict(prod, **common, **{
                        "RateCode": f"{s_}.{term}.{RATE_UPFRONT}", "PriceDescription": "Upfront Fee",
                        "Unit": "Quantity", "PricePerUnit": str(upfront)}))
                reserved.append((term, lease, option, klass, hourly, upfront, hd))
        if key == "linux" and t in SIZES:
            products[t] = dict(sku=s_, product=prod, od=price, od_desc=d, reserved=reserved)
    return rows


EBS_VOLUMES = [
    # api, idx, usage stem, volume type, media, max size, max iops, max tput, burst, long name
    ("gp3", 0, "EBS:VolumeUsage.gp3", "General Purpose", "SSD-backed", "64 TiB", "80000",
     "2000 MiB/s", "", "General Purpose (gp3)"),
    ("gp2", 1, "EBS:VolumeUsage.gp2", "General Purpose", "SSD-backed", "16 TiB", "16000",
     "250 MiB/s", "3000 for volumes <= 1 TiB", "General Purpose SSD (gp2)"),
    ("io2", 2, "EBS:VolumeUsage.io2", "Provisioned IOPS", "SSD-backed", "64 TiB", "256000",
     "4000 MiB/s", "", "Provisioned IOPS SSD (io2)"),
    ("io1", 3, "EBS:VolumeUsage.piops", "Provisioned IOPS", "SSD-backed", "16 TiB", "64000",
     "1000 MiB/s", "", "Provisioned IOPS SSD (io1)"),
    ("st1", 4, "EBS:VolumeUsage.st1", "Throughput Optimized HDD", "HDD-backed", "16 TiB", "500",
     "500 MiB/s", "", "Throughput Optimized HDD (st1)"),
    ("sc1", 5, "EBS:VolumeUsage.sc1", "Cold HDD", "HDD-backed", "16 TiB", "250",
     "250 MiB/s", "", "Cold HDD (sc1)"),
    ("standard", 6, "EBS:VolumeUsage", "Magnetic", "HDD-backed", "1 TiB", "40 - 200",
     "40 - 90 MB/sec", "Hundreds", "Magnetic provisioned storage"),
]


def ec2_other_rows(region: str, storage_products: list) -> list[dict]:
    r = REGIONS[region]
    prices = EBS_PRICES[region]
    base = {"serviceCode": "AmazonEC2", "Location": r["name"], "Location Type": "AWS Region",
            "Region Code": region, "serviceName": "Amazon Elastic Compute Cloud",
            "OfferTermCode": OD_TERM, "TermType": "OnDemand", "EffectiveDate": OD_EFFECTIVE,
            "StartingRange": "0", "EndingRange": "Inf", "Currency": "USD", "operation": ""}
    rows = []
    for api, idx, stem, vtype, media, maxsize, iops, tput, burst, longname in EBS_VOLUMES:
        s_ = sku(region, "ebs", api)
        price = prices[idx]
        if api == "standard":
            d = f"${pdesc(price)} per GB-month of Magnetic provisioned storage - {r['name']}"
        else:
            d = f"${pdesc(price)} per GB-month of {longname} provisioned storage - {r['name']}"
        prod = dict(base, **{"Product Family": "Storage", "Storage Media": media,
                             "Volume Type": vtype, "Max Volume Size": maxsize,
                             "Max IOPS/volume": iops, "Max IOPS Burst Performance": burst,
                             "Max throughput/volume": tput, "usageType": f"{r['prefix']}{stem}",
                             "Volume API Name": api})
        rows.append(dict(prod, **{"SKU": s_, "RateCode": f"{s_}.{OD_TERM}.{RATE_HOURLY}",
                                  "PriceDescription": d, "Unit": "GB-Mo", "PricePerUnit": p10(price)}))
        storage_products.append(dict(sku=s_, product=prod, price=price, desc=d, unit="GB-Mo"))
    extra = [
        ("Storage Snapshot", f"{r['prefix']}EBS:SnapshotUsage", prices[7], "GB-Mo",
         f"${pdesc(prices[7])} per GB-Month of snapshot data stored - {r['name']}",
         {"Storage Media": "Amazon S3"}),
        ("Storage Snapshot", f"{r['prefix']}EBS:SnapshotArchiveStorage", round(prices[7] / 4, 4),
         "GB-Mo", f"${pdesc(round(prices[7] / 4, 4))} per GB-month of snapshot archive storage - {r['name']}",
         {"Storage Media": "Amazon S3 Glacier", "SnapshotArchiveFeeType": "SnapshotArchiveStorage"}),
        ("System Operation", f"{r['prefix']}EBS:VolumeP-IOPS.gp3", 0.005, "IOPS-Mo",
         f"$0.005 per IOPS-month provisioned - {r['name']}",
         {"Group": "EBS IOPS", "Group Description": "IOPS", "Provisioned": "Yes",
          "Volume API Name": "gp3", "Volume Type": "General Purpose"}),
        ("Provisioned Throughput", f"{r['prefix']}EBS:VolumeP-Throughput.gp3", 40.96, "GiBps-mo",
         f"$0.04 per provisioned MiB/s-month of gp3 throughput - {r['name']}",
         {"Provisioned": "Yes", "Volume API Name": "gp3", "Volume Type": "General Purpose"}),
        ("IP Address", f"{r['prefix']}PublicIPv4:InUseAddress", 0.005, "Hrs",
         "$0.005 per In-use public IPv4 address per hour", {"Group": "VPCPublicIPv4Address",
                                                            "Group Description": "Hourly charge for In-use Public IPv4 Addresses"}),
        ("IP Address", f"{r['prefix']}PublicIPv4:IdleAddress", 0.005, "Hrs",
         "$0.005 per Idle public IPv4 address per hour", {"Group": "VPCPublicIPv4Address",
                                                         "Group Description": "Hourly charge for Idle Public IPv4 Addresses"}),
    ]
    for fam, usage, price, unit, d, attrs in extra:
        s_ = sku(region, "other", usage)
        rows.append(dict(base, **attrs, **{"Product Family": fam, "usageType": usage, "SKU": s_,
                                           "RateCode": f"{s_}.{OD_TERM}.{RATE_HOURLY}",
                                           "PriceDescription": d, "Unit": unit,
                                           "PricePerUnit": p10(price)}))
    return rows


def _sp_rate(plan_sku: str, od_sku: str, usage: str, operation: str, service: str, price: float,
             region: str, t: str) -> dict:
    return {"discountedSku": od_sku, "discountedUsageType": usage, "discountedOperation": operation,
            "discountedServiceCode": service, "rateCode": f"{plan_sku}.{od_sku}", "unit": "Hrs",
            "discountedRate": {"price": f"{price:.4f}".rstrip("0").rstrip("."), "currency": "USD"},
            "discountedRegionCode": region, "discountedInstanceType": t}


def savings_plan_file(region: str) -> dict:
    """A region's Savings Plans file: the six Compute Savings Plans and six EC2 Instance Savings Plans
    per GPU family priced there, with a rate per GPU type's Linux shared on-demand SKU; beside them
    rates the adapter must leave out (the Windows SKU of one type, a CPU type, Fargate)."""
    r = REGIONS[region]
    prefix, loc = r["prefix"], r["name"]
    types = types_priced(region)
    products, terms = [], []
    plans = [("ComputeSavingsPlans", None)] + [("EC2InstanceSavingsPlans", f) for f in
                                               sorted({family_of(t) for t in types})]
    for family, fam in plans:
        for years in (1, 3):
            for option in ("No Upfront", "Partial Upfront", "All Upfront"):
                compact = option.replace(" ", "")
                plan_sku = sku("savingsplan", region if fam else "any", family, fam, years, option)
                if fam is None:
                    usage = f"ComputeSP:{years}yr{compact}"
                    desc = f"{years} year {option} Compute Savings Plan"
                    attrs = {"purchaseOption": option, "granularity": "hourly", "instanceType": "",
                             "purchaseTerm": f"{years}yr", "locationType": "AWS Region", "location": "Any"}
                else:
                    usage = f"{r['dt']}-EC2SP:{fam}.{years}yr{compact}"
                    desc = f"{years} year {option} {fam} EC2 Instance Savings Plan in {region}"
                    attrs = {"purchaseOption": option, "granularity": "hourly", "instanceType": fam,
                             "purchaseTerm": f"{years}yr", "locationType": "AWS Region", "location": loc,
                             "regionCode": region}
                products.append({"sku": plan_sku, "productFamily": family, "serviceCode": "ComputeSavingsPlans",
                                 "usageType": usage, "operation": "", "attributes": attrs})
                share = SP_SHARE[(family, years, option)]
                rates = []
                covered = [t for t in types if fam is None or family_of(t) == fam]
                for t in covered:
                    od_sku = sku(region, t, "Linux", "NA", "Shared", "Used")
                    rates.append(_sp_rate(plan_sku, od_sku, f"{prefix}BoxUsage:{t}", "RunInstances", "AmazonEC2",
                                          od_price(t, region) * share, region, t))
                first = covered[0]
                if FAMILIES[family_of(first)]["cpu"][1] != "arm64":   # a Windows SKU: never an offer
                    win = sku(region, first, "Windows", "NA", "Shared", "Used")
                    rates.append(_sp_rate(plan_sku, win, f"{prefix}BoxUsage:{first}", "RunInstances:0002",
                                          "AmazonEC2", od_price(first, region) * share * 1.3, region, first))
                if fam is None:
                    if region in REGION_ORDER:   # a CPU type (its SKU is in the EC2 file, no GPU)
                        rates.append(_sp_rate(plan_sku, sku(region, "m5.large", "Linux", "NA", "Shared", "Used"),
                                              f"{prefix}BoxUsage:m5.large", "RunInstances", "AmazonEC2",
                                              NON_GPU["m5.large"]["od"][REGION_ORDER.index(region)] * share,
                                              region, "m5.large"))
                    rates.append(_sp_rate(plan_sku, sku("fargate", region), f"{r['dt']}-Fargate-vCPU-Hours:perCPU",
                                          "FargateTask", "AmazonECS", 0.04048 * share, region, ""))
                terms.append({"sku": plan_sku, "description": desc, "effectiveDate": SP_EFFECTIVE,
                              "leaseContractLength": {"duration": years, "unit": "year"}, "rates": rates})
    return {"version": SP_VERSION, "publicationDate": SP_PUBLICATION, "regionCode": region,
            "products": products, "terms": {"savingsPlan": terms}}


def csv_bytes(header: list[str], meta: list[tuple[str, str]], rows: list[dict]) -> bytes:
    def q(v: str) -> str:
        return '"' + v.replace('"', '""') + '"' if v != "" else ""
    lines = [",".join(q(x) for x in m) for m in meta]
    lines.append(",".join(q(x) for x in header))
    for row in rows:
        unknown = set(row) - set(header)
        if unknown:
            raise KeyError(f"columns not in header: {unknown}")
        lines.append(",".join(q(row.get(col, "")) for col in header))
    return ("\n".join(lines) + "\n").encode()


# ---------------------------------------------------------------- data transfer
DT_TIERS = [(0, 100), (100, 10240), (10240, 51200), (51200, 153600), (153600, "Inf")]


def dt_products(region: str) -> list[dict]:
    """AWSDataTransfer products whose fromRegionCode is `region` (plus inbound distractors)."""
    r = REGIONS[region]
    name = r["name"]
    t1, t2, t3, t4, inter = EGRESS[region]
    prods = []
    out_usage = "DataTransfer-Out-Bytes" if region == "us-east-1" else f"{r['prefix']}DataTransfer-Out-Bytes"
    tiers = []
    def d3(x):   # "$0.090", "$0.1093": at least 3 decimals, as on real bill lines
        whole, dec = f"{x:.6f}".rstrip("0").split(".")
        return f"{whole}.{dec:0<3}"
    descs = [
        "$0.000 per GB - data transfer out under the monthly global free tier",
        f"${d3(t1)} per GB - first 10 TB / month data transfer out beyond the global free tier",
        f"${d3(t2)} per GB - next 40 TB / month data transfer out",
        f"${d3(t3)} per GB - next 100 TB / month data transfer out",
        f"${d3(t4)} per GB - greater than 150 TB / month data transfer out",
    ]
    for (b, e), p, d in zip(DT_TIERS, (0.0, t1, t2, t3, t4), descs):
        tiers.append((str(b), str(e), p, d))
    prods.append(dict(kind="out", transfer="AWS Outbound", from_loc=name, from_type="AWS Region",
                      to_loc="External", to_type="Other", usage=out_usage, from_code=region,
                      to_code="", tiers=tiers))
    dests = [(c, REGIONS[c]["name"], REGIONS[c]["dt"]) for c in REGION_ORDER if c != region]
    dests += [(c, n, code_) for c, (n, code_) in EXTRA_DT_REGIONS.items()]
    for dcode, dname, ddt in dests:
        price = inter
        if {region, dcode} == {"us-east-1", "us-east-2"}:
            price = 0.01
        d = f"${pdesc(price)} per GB - {name} data transfer to {dname}"
        prods.append(dict(kind="inter", transfer="InterRegion Outbound", from_loc=name,
                          from_type="AWS Region", to_loc=dname, to_type="AWS Region",
                          usage=f"{r['dt']}-{ddt}-AWS-Out-Bytes", from_code=region, to_code=dcode,
                          tiers=[("0", "Inf", price, d)]))
    # inbound side of two inter-region pairs (free) and intra-region transfer
    for dcode in [c for c in REGION_ORDER if c != region][:2]:
        dname, ddt = REGIONS[dcode]["name"], REGIONS[dcode]["dt"]
        prods.append(dict(kind="inter-in", transfer="InterRegion Inbound", from_loc=name,
                          from_type="AWS Region", to_loc=dname, to_type="AWS Region",
                          usage=f"{ddt}-{r['dt']}-AWS-In-Bytes", from_code=region, to_code=dcode,
                          tiers=[("0", "Inf", 0.0, f"$0.00 per GB - {dname} data transfer from {name}")]))
    prods.append(dict(kind="intra", transfer="IntraRegion", from_loc=name, from_type="AWS Region",
                      to_loc=name, to_type="AWS Region",
                      usage=f"{r['prefix']}DataTransfer-Regional-Bytes", from_code=region,
                      to_code=region,
                      tiers=[("0", "Inf", 0.01, "$0.010 per GB - regional data transfer - in/out/between EC2 AZs or using elastic IPs or ELB")]))
    for p in prods:
        p["sku"] = sku("dt", region, p["usage"], p["to_code"])
        p["rates"] = [code(10, "dtrate", p["sku"], i) for i in range(len(p["tiers"]))]
    return prods


def dt_inbound_external(region: str) -> dict:
    r = REGIONS[region]
    usage = "DataTransfer-In-Bytes" if region == "us-east-1" else f"{r['prefix']}DataTransfer-In-Bytes"
    p = dict(kind="in", transfer="AWS Inbound", from_loc="External", from_type="Other",
             to_loc=r["name"], to_type="AWS Region", usage=usage, from_code="", to_code=region,
             tiers=[("0", "Inf", 0.0, "$0.00 per GB - data transfer in per month")])
    p["sku"] = sku("dt", region, usage, "in")
    p["rates"] = [code(10, "dtrate", p["sku"], 0)]
    return p


def dt_rows(prods: list[dict]) -> list[dict]:
    rows = []
    for p in prods:
        for (b, e, price, d), rate in zip(p["tiers"], p["rates"]):
            rows.append({"SKU": p["sku"], "OfferTermCode": OD_TERM,
                         "RateCode": f"{p['sku']}.{OD_TERM}.{rate}", "TermType": "OnDemand",
                         "PriceDescription": d, "EffectiveDate": OD_EFFECTIVE,
                         "StartingRange": b, "EndingRange": e, "Unit": "GB",
                         "PricePerUnit": p10(price), "Currency": "USD",
                         "Product Family": "Data Transfer", "serviceCode": "AWSDataTransfer",
                         "Transfer Type": p["transfer"], "From Location": p["from_loc"],
                         "From Location Type": p["from_type"], "To Location": p["to_loc"],
                         "To Location Type": p["to_type"], "usageType": p["usage"],
                         "operation": "", "From Region Code": p["from_code"],
                         "serviceName": "AWS Data Transfer", "To Region Code": p["to_code"]})
    return rows


# ---------------------------------------------------------------- GetProducts JSON
CSV_TO_ATTR = {
    "Instance Type": "instanceType", "Current Generation": "currentGeneration",
    "Instance Family": "instanceFamily", "vCPU": "vcpu", "Physical Processor": "physicalProcessor",
    "Clock Speed": "clockSpeed", "Memory": "memory", "Storage": "storage",
    "Network Performance": "networkPerformance", "Processor Architecture": "processorArchitecture",
    "Tenancy": "tenancy", "Operating System": "operatingSystem", "License Model": "licenseModel",
    "usageType": "usagetype", "operation": "operation", "AvailabilityZone": "availabilityzone",
    "CapacityStatus": "capacitystatus", "ClassicNetworkingSupport": "classicnetworkingsupport",
    "Dedicated EBS Throughput": "dedicatedEbsThroughput", "ECU": "ecu",
    "Enhanced Networking Supported": "enhancedNetworkingSupported", "GPU": "gpu",
    "GPU Memory": "gpuMemory", "Intel AVX2 Available": "intelAvx2Available",
    "Intel AVX Available": "intelAvxAvailable", "Intel Turbo Available": "intelTurboAvailable",
    "MarketOption": "marketoption", "Normalization Size Factor": "normalizationSizeFactor",
    "Pre Installed S/W": "preInstalledSw", "Processor Features": "processorFeatures",
    "Region Code": "regionCode", "serviceName": "servicename", "serviceCode": "servicecode",
    "Location": "location", "Location Type": "locationType",
    "VPCNetworkingSupport": "vpcnetworkingsupport", "Storage Media": "storageMedia",
    "Volume Type": "volumeType", "Max Volume Size": "maxVolumeSize",
    "Max IOPS/volume": "maxIopsvolume", "Max IOPS Burst Performance": "maxIopsBurstPerformance",
    "Max throughput/volume": "maxThroughputvolume", "Volume API Name": "volumeApiName",
}


def attrs_from(prod: dict) -> dict:
    return {CSV_TO_ATTR[k]: v for k, v in prod.items()
            if k in CSV_TO_ATTR and (v != "" or k == "operation")}


def od_term(s_: str, dims: list[tuple]) -> dict:
    pd = {}
    for rate, unit, b, e, price, d in dims:
        rc = f"{s_}.{OD_TERM}.{rate}"
        dim = {"unit": unit, "endRange": e, "description": d, "appliesTo": [], "rateCode": rc,
               "beginRange": b, "pricePerUnit": {"USD": p10(price)}}
        pd[rc] = dim
    return {f"{s_}.{OD_TERM}": {"priceDimensions": pd, "sku": s_, "effectiveDate": JSON_EFFECTIVE,
                                "offerTermCode": OD_TERM, "termAttributes": {}}}


def price_item(product_family: str, s_: str, attrs: dict, terms: dict, service: str, version: str,
               publication: str) -> str:
    item = {"product": {"productFamily": product_family, "attributes": attrs, "sku": s_},
            "serviceCode": service, "terms": terms, "version": version,
            "publicationDate": publication}
    return json.dumps(item, separators=(",", ":"))


def gpu_price_item(p: dict) -> str:
    s_ = p["sku"]
    terms = {"OnDemand": od_term(s_, [(RATE_HOURLY, "Hrs", "0", "Inf", p["od"], p["od_desc"])])}
    if p["reserved"]:
        res = {}
        for term, lease, option, klass, hourly, upfront, hd in p["reserved"]:
            pd = {}
            if upfront is not None:
                rc = f"{s_}.{term}.{RATE_UPFRONT}"
                pd[rc] = {"unit": "Quantity", "description": "Upfront Fee", "appliesTo": [],
                          "rateCode": rc, "pricePerUnit": {"USD": str(upfront)}}
            rc = f"{s_}.{term}.{RATE_HOURLY}"
            pd[rc] = {"unit": "Hrs", "endRange": "Inf", "description": hd, "appliesTo": [],
                      "rateCode": rc, "beginRange": "0", "pricePerUnit": {"USD": p10(hourly)}}
            res[f"{s_}.{term}"] = {"priceDimensions": pd, "sku": s_, "effectiveDate": JSON_EFFECTIVE,
                                   "offerTermCode": term,
                                   "termAttributes": {"LeaseContractLength": lease,
                                                      "OfferingClass": klass,
                                                      "PurchaseOption": option}}
        terms["Reserved"] = res
    attrs = attrs_from(p["product"])
    return price_item("Compute Instance", s_, attrs, terms, "AmazonEC2", EC2_VERSION, EC2_PUBLICATION)


def storage_price_item(p: dict) -> str:
    attrs = attrs_from(p["product"])
    terms = {"OnDemand": od_term(p["sku"], [(RATE_HOURLY, "GB-Mo", "0", "Inf", p["price"], p["desc"])])}
    return price_item("Storage", p["sku"], attrs, terms, "AmazonEC2", EC2_VERSION, EC2_PUBLICATION)


def dt_price_item(p: dict) -> str:
    attrs = {"transferType": p["transfer"], "fromLocation": p["from_loc"],
             "fromLocationType": p["from_type"], "toLocation": p["to_loc"],
             "toLocationType": p["to_type"], "usagetype": p["usage"], "operation": "",
             "servicecode": "AWSDataTransfer", "servicename": "AWS Data Transfer"}
    if p["from_code"]:
        attrs["fromRegionCode"] = p["from_code"]
    if p["to_code"]:
        attrs["toRegionCode"] = p["to_code"]
    dims = [(rate, "GB", b, e, price, d) for (b, e, price, d), rate in zip(p["tiers"], p["rates"])]
    terms = {"OnDemand": od_term(p["sku"], dims)}
    return price_item("Data Transfer", p["sku"], attrs, terms, "AWSDataTransfer", DT_VERSION,
                      DT_PUBLICATION)


# ---------------------------------------------------------------- spot advisor
def advisor_feed() -> dict:
    instance_types = {}
    for t, row in ADVISOR_REAL.items():
        instance_types[t] = {"emr": row[0], "cores": row[1], "ram_gb": row[2]}
    for t, s in SIZES.items():
        if t not in instance_types:
            instance_types[t] = {"emr": False, "cores": s["vcpu"], "ram_gb": float(s["mem"] / 1024)}
    spot_advisor = {}
    for region in ALL_REGIONS:
        linux, windows = {}, {}
        others = [x for x in ADVISOR_REAL if x not in SIZES] if region in REGION_ORDER else []
        for t in list(SIZES) + others:
            real = ADVISOR_REAL.get(t)
            if region in ("us-east-1", "eu-west-1") and real is not None:
                off = 3 if region == "us-east-1" else 5
                if real[off]:
                    linux[t] = {"s": real[off][0], "r": real[off][1]}
                if real[off + 1]:
                    windows[t] = {"s": real[off + 1][0], "r": real[off + 1][1]}
                continue
            if region in ("us-east-1", "eu-west-1") and t not in SIZES:
                continue
            if t in SIZES:
                azs = azs_for(t, region)
                prices = [spot_price(t, region, a) for a in azs]
                prices = [p for p in prices if p is not None]
                if not prices:
                    continue
                ratio = sum(prices) / len(prices) / od_price(t, region)
            else:   # non-GPU types outside the two sampled regions
                ratio = 0.30 + 0.25 * frac("adv-ratio", t, region)
            s_val = int(round(100 * (1 - ratio) + (frac("adv-s", t, region) - 0.5) * 8))
            big = t in SIZES and (SIZES[t]["gpus"] >= 4 or family_of(t).startswith("p"))
            x = frac("adv-r", t, region)
            if big:
                r_val = 4 if x < 0.7 else (3 if x < 0.85 else 2)
            else:
                r_val = 0 if x < 0.35 else (1 if x < 0.55 else (2 if x < 0.7 else (3 if x < 0.8 else 4)))
            linux[t] = {"s": s_val, "r": r_val}
            arm = t in SIZES and FAMILIES[family_of(t)]["cpu"][1] == "arm64"
            if not arm and not t.startswith(("c7g", "r6g")):
                windows[t] = {"s": max(5, s_val - 12 - int(10 * frac("adv-w", t, region))),
                              "r": min(4, r_val + (1 if frac("adv-wr", t, region) < 0.3 else 0))}
        spot_advisor[region] = {"Linux": linux, "Windows": windows}
    return {"instance_types": instance_types, "ranges": ADVISOR_RANGES,
            "spot_advisor": spot_advisor, "global_rate": "<10%"}


# ---------------------------------------------------------------- writing
class Writer:
    def __init__(self, root: Path):
        self.root = root
        self.exchanges = []
        self.sources = {}      # body_file -> ("xml", op, dict) / ("json", op, dict) / ...
        self.stats = {}

    def write(self, rel: str, data: bytes) -> str:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if rel.endswith(".gz"):
            buf = io.BytesIO()
            with gzip.GzipFile(filename="", mode="wb", fileobj=buf, mtime=0, compresslevel=9) as g:
                g.write(data)
            path.write_bytes(buf.getvalue())
        else:
            path.write_bytes(data)
        return rel

    def exchange(self, host, method, path, match, body_file, content_type, note=None):
        ex = {"host": host, "method": method, "path": path, "match": match,
              "response": {"status": 200, "headers": {"Content-Type": content_type},
                           "body_file": body_file}}
        self.exchanges.append(ex)


def paginate(items: list, size: int) -> list[list]:
    return [items[i:i + size] for i in range(0, len(items), size)] or [[]]


def build(root: Path) -> Writer:
    if root.exists():
        for child in root.iterdir():
            if child.name == "README.md":
                continue
            if child.is_dir():
                shutil.rmtree(child)
            else:
                child.unlink()
    root.mkdir(parents=True, exist_ok=True)
    w = Writer(root)
    stats = w.stats

    # ---------------- bulk price list: AmazonEC2
    pricing_host = "pricing.us-east-1.amazonaws.com"
    for offer, version, publication, listed in (("AmazonEC2", EC2_VERSION, EC2_PUBLICATION, ALL_REGIONS),
                                                ("AWSDataTransfer", DT_VERSION, DT_PUBLICATION, REGION_ORDER)):
        idx = {"formatVersion": "v1.0", "disclaimer": DISCLAIMER, "publicationDate": publication,
               "regions": {rg: {"regionCode": rg,
                                "currentVersionUrl": f"/offers/v1.0/aws/{offer}/{version}/{rg}/index.json"}
                           for rg in listed}}
        rel = w.write(f"bulk/{offer}/region_index.json",
                      (json.dumps(idx, indent=2, separators=(",", " : ")) + "\n").encode())
        w.exchange(pricing_host, "GET", f"/offers/v1.0/aws/{offer}/current/region_index.json", {},
                   rel, "application/json")

    gpu_products, storage_products, dt_by_region = {}, {}, {}
    for region in ALL_REGIONS:
        products, storage = {}, []
        rows = []
        for t in types_priced(region):
            rows += ec2_compute_rows(t, region, products)
        if region in REGION_ORDER:   # the other regions carry GPU rows only
            for t in NON_GPU:
                rows += ec2_compute_rows(t, region, {})
            rows += ec2_other_rows(region, storage)
        rows.sort(key=lambda r: (r["SKU"], r["OfferTermCode"], r["RateCode"]))
        meta = [("FormatVersion", "v1.0"), ("Disclaimer", DISCLAIMER),
                ("Publication Date", EC2_PUBLICATION), ("Version", EC2_VERSION),
                ("OfferCode", "AmazonEC2")]
        rel = w.write(f"bulk/AmazonEC2/{region}/index.csv.gz", csv_bytes(CSV_EC2_HEADER, meta, rows))
        w.exchange(pricing_host, "GET", f"/offers/v1.0/aws/AmazonEC2/{EC2_VERSION}/{region}/index.csv",
                   {}, rel, "text/csv")
        gpu_products[region], storage_products[region] = products, storage
        reserved = sum(1 for r in rows if r["TermType"] == "Reserved")
        kept = sum(1 for r in rows if r["TermType"] == "OnDemand" and r.get("Instance Family") == "GPU instance"
                   and r.get("Operating System") == "Linux" and r.get("Tenancy") == "Shared"
                   and r.get("Pre Installed S/W") == "NA" and r.get("CapacityStatus") == "Used"
                   and r.get("License Model") == "No License required")
        stats[f"csv_rows:{region}"] = len(rows)
        stats[f"csv_reserved_share:{region}"] = round(reserved / len(rows), 3)
        stats[f"csv_gpu_linux_od_rows:{region}"] = kept
        if region not in REGION_ORDER:
            dt_by_region[region] = []
            continue

        dts = dt_products(region)
        dt_by_region[region] = dts
        meta = [("FormatVersion", "v1.0"), ("Disclaimer", DISCLAIMER),
                ("Publication Date", DT_PUBLICATION), ("Version", DT_VERSION),
                ("OfferCode", "AWSDataTransfer")]
        drows = dt_rows(dts + [dt_inbound_external(region)])
        drows.sort(key=lambda r: (r["SKU"], r["RateCode"]))
        rel = w.write(f"bulk/AWSDataTransfer/{region}/index.csv.gz", csv_bytes(CSV_DT_HEADER, meta, drows))
        w.exchange(pricing_host, "GET",
                   f"/offers/v1.0/aws/AWSDataTransfer/{DT_VERSION}/{region}/index.csv", {}, rel,
                   "text/csv")
        stats[f"dt_csv_rows:{region}"] = len(drows)

    # ---------------- Savings Plans price list (JSON only; the adapter streams each region's file)
    sp_index = {"disclaimer": DISCLAIMER, "publicationDate": SP_PUBLICATION,
                "regions": [{"regionCode": rg, "versionUrl":
                             f"/savingsPlan/v1.0/aws/AWSComputeSavingsPlan/{SP_VERSION}/{rg}/index.json"}
                            for rg in ALL_REGIONS]}
    rel = w.write("bulk/AWSComputeSavingsPlan/region_index.json", (json.dumps(sp_index, indent=2) + "\n").encode())
    w.exchange(pricing_host, "GET", "/savingsPlan/v1.0/aws/AWSComputeSavingsPlan/current/region_index.json", {},
               rel, "application/json")
    for region in ALL_REGIONS:
        doc = savings_plan_file(region)
        rel = w.write(f"bulk/AWSComputeSavingsPlan/{region}/index.json.gz", json.dumps(doc, indent=1).encode())
        w.exchange(pricing_host, "GET", f"/savingsPlan/v1.0/aws/AWSComputeSavingsPlan/{SP_VERSION}/{region}/index.json",
                   {}, rel, "application/json")
        stats[f"savings_plan_rates:{region}"] = sum(len(t["rates"]) for t in doc["terms"]["savingsPlan"])

    # ---------------- Pricing API GetProducts
    api_host = "api.pricing.us-east-1.amazonaws.com"
    target = {"X-Amz-Target": "AWSPriceListService.GetProducts"}
    for region in ALL_REGIONS:
        kinds = [
            ("gpu", {"ServiceCode": "AmazonEC2",
                     "Filters": [{"Field": "regionCode", "Value": region},
                                 {"Field": "instanceFamily", "Value": "GPU instance"}]},
             [gpu_price_item(gpu_products[region][t]) for t in sorted(
                 gpu_products[region], key=lambda t: gpu_products[region][t]["sku"])],
             min(PAGE_GP_GPU, max(1, math.ceil(len(gpu_products[region]) / 2)))),
            ("storage", {"ServiceCode": "AmazonEC2",
                         "Filters": [{"Field": "regionCode", "Value": region},
                                     {"Field": "productFamily", "Value": "Storage"}]},
             [storage_price_item(p) for p in sorted(storage_products[region], key=lambda p: p["sku"])],
             PAGE_GP_STORAGE),
            ("transfer", {"ServiceCode": "AWSDataTransfer",
                          "Filters": [{"Field": "fromRegionCode", "Value": region}]},
             [dt_price_item(p) for p in sorted(dt_by_region[region], key=lambda p: p["sku"])],
             PAGE_GP_TRANSFER),
        ]
        for kind, match_json, items, size in kinds:
            pages = paginate(items, size)
            tokens = [pricing_token(region, kind, i) for i in range(len(pages))]
            for i, page in enumerate(pages):
                body = {"FormatVersion": "aws_v1", "PriceList": page}
                if i + 1 < len(pages):
                    body["NextToken"] = tokens[i + 1]
                data = json.dumps(body, separators=(",", ":")).encode()
                ext = "json.gz" if len(data) > 40_000 else "json"
                rel = w.write(f"pricing/{region}/{kind}.{i + 1}.{ext}", data)
                w.sources[rel] = ("pricing", "GetProducts", body)
                m = json.loads(json.dumps(match_json))
                if i > 0:
                    m["NextToken"] = tokens[i]
                w.exchange(api_host, "POST", "/", {"headers": target, "json": m}, rel,
                           "application/x-amz-json-1.1")
            stats[f"getproducts_{kind}:{region}"] = f"{len(items)} items / {len(pages)} pages"

    # ---------------- EC2 Query API
    regions_body = {"Regions": [
        {"Endpoint": f"ec2.{rg}.amazonaws.com", "RegionName": rg,
         "OptInStatus": "opted-in" if rg in OPT_IN_REGIONS else "opt-in-not-required"}
        for rg in sorted(ALL_REGIONS)] + [
        {"Endpoint": f"ec2.{rg}.amazonaws.com", "RegionName": rg, "OptInStatus": "not-opted-in"}
        for rg in NOT_OPTED_IN]}
    regions_body["Regions"].sort(key=lambda r: r["RegionName"])
    data = ec2_xml("DescribeRegions", regions_body, uuid_like("us-east-1", "DescribeRegions", 0))
    rel = w.write("ec2/us-east-1/DescribeRegions.xml", data)
    w.sources[rel] = ("ec2", "DescribeRegions", regions_body)
    w.exchange("ec2.us-east-1.amazonaws.com", "POST", "/", {"params": {"Action": "DescribeRegions"}}, rel,
               "text/xml;charset=UTF-8")
    for region in ALL_REGIONS:
        host = f"ec2.{region}.amazonaws.com"
        offered = sorted(types_offered(region), key=lambda t: h("order", region, t))
        infos = [instance_type_info(t) for t in offered]
        offerings = []
        spots = []
        for t in offered:
            for a in azs_for(t, region):
                offerings.append({"InstanceType": t, "LocationType": "availability-zone", "Location": a})
                sp = spot_price(t, region, a)
                if sp is None:
                    continue
                changes = (spot_history(t, region, a) if t in HISTORY_SERIES.get(region, ())
                           else [(sp, spot_timestamp(t, a))])
                for price, stamp in changes:
                    spots.append({"AvailabilityZone": a, "AvailabilityZoneId": az_id(region, a),
                                  "InstanceType": t, "ProductDescription": "Linux/UNIX",
                                  "SpotPrice": f"{price:.6f}", "Timestamp": stamp})
        offerings.sort(key=lambda o: h("off", region, o["InstanceType"], o["Location"]))
        spots.sort(key=lambda s: (s["Timestamp"], s["InstanceType"], s["AvailabilityZone"]), reverse=True)
        calls = [
            ("DescribeInstanceTypes", "InstanceTypes", infos,
             min(PAGE_DESCRIBE_TYPES, math.ceil(len(infos) / 2)), {}),
            ("DescribeInstanceTypeOfferings", "InstanceTypeOfferings", offerings,
             min(PAGE_OFFERINGS_MAX, math.ceil(len(offerings) / 2)), {"LocationType": "availability-zone"}),
            ("DescribeSpotPriceHistory", "SpotPriceHistory", spots,
             min(PAGE_SPOT_HISTORY if region in HISTORY_SERIES else PAGE_SPOT_MAX, math.ceil(len(spots) / 2)), {}),
        ]
        for op, key, items, size, extra in calls:
            pages = paginate(items, size)
            tokens = [ec2_token(region, op, i) for i in range(len(pages))]
            for i, page in enumerate(pages):
                body = {key: page}
                if i + 1 < len(pages):
                    body["NextToken"] = tokens[i + 1]
                elif op == "DescribeSpotPriceHistory":
                    body["NextToken"] = ""      # real last page: <nextToken></nextToken>
                data = ec2_xml(op, body, uuid_like(region, op, i))
                ext = "xml.gz" if len(data) > 40_000 else "xml"
                rel = w.write(f"ec2/{region}/{op}.{i + 1}.{ext}", data)
                w.sources[rel] = ("ec2", op, body)
                params = {"Action": op, **extra}
                if i > 0:
                    params["NextToken"] = tokens[i]
                w.exchange(host, "POST", "/", {"params": params}, rel, "text/xml;charset=UTF-8")
            stats[f"{op}:{region}"] = f"{len(items)} items / {len(pages)} pages"
        if region in CAPACITY_BLOCK_REGIONS:
            op = "DescribeCapacityBlockOfferings"
            for t in sorted(t for t in offered if "capacity-block" in FAMILIES[family_of(t)]["usage"]
                            and azs_for(t, region)):
                for hours in CAPACITY_BLOCK_HOURS:
                    body = {"CapacityBlockOfferings": capacity_block_offerings(t, region, hours)}
                    data = ec2_xml(op, body, uuid_like(region, op, t, hours))
                    rel = w.write(f"ec2/{region}/{op}.{t}.{hours}h.xml", data)
                    w.sources[rel] = ("ec2", op, body)
                    params = {"Action": op, "InstanceType": t, "InstanceCount": "1",
                              "CapacityDurationHours": str(hours)}
                    w.exchange(host, "POST", "/", {"params": params}, rel, "text/xml;charset=UTF-8")
                    stats[f"{op}:{region}:{t}:{hours}h"] = f"{len(body['CapacityBlockOfferings'])} offerings"

    # ---------------- Spot Instance Advisor
    feed = advisor_feed()
    rel = w.write("spot-advisor/spot-advisor-data.json", json.dumps(feed, separators=(", ", ": ")).encode())
    w.exchange("spot-bid-advisor.s3.amazonaws.com", "GET", "/spot-advisor-data.json", {}, rel,
               "application/json")

    manifest = {"provider": "aws", "recorded_at": RECORDED_AT, "settings": SETTINGS, "exchanges": w.exchanges}
    (root / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    stats["exchanges"] = len(w.exchanges)
    stats["unit exchanges"] = build_capacity_block_unit(root, root.parent / UNIT, w.exchanges)
    return w


# The refresh unit `aws_capacity_blocks` (adapters/aws/capacity_blocks.py) asks only these of
# the same recording, in the capacity-block regions: its folder holds copies of their bodies.
UNIT = "aws_capacity_blocks"
UNIT_ACTIONS = ("DescribeInstanceTypes", "DescribeCapacityBlockOfferings")
UNIT_SETTINGS = {"aws_capacity_blocks": ",".join(CAPACITY_BLOCK_REGIONS)}


def build_capacity_block_unit(aws_root: Path, root: Path, exchanges: list[dict]) -> int:
    hosts = {f"ec2.{rg}.amazonaws.com" for rg in CAPACITY_BLOCK_REGIONS}
    kept = [ex for ex in exchanges if ex["host"] in hosts
            and ex["match"].get("params", {}).get("Action") in UNIT_ACTIONS]
    if root.exists():
        for child in root.iterdir():
            if child.name != "README.md":
                shutil.rmtree(child) if child.is_dir() else child.unlink()
    for ex in kept:
        rel = ex["response"]["body_file"]
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(aws_root / rel, root / rel)
    manifest = {"provider": UNIT, "recorded_at": RECORDED_AT, "settings": UNIT_SETTINGS, "exchanges": kept}
    (root / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return len(kept)


# =====================================================================================
# ==== VERIFY
# =====================================================================================
def read_body(root: Path, rel: str) -> bytes:
    data = (root / rel).read_bytes()
    return gzip.decompress(data) if rel.endswith(".gz") else data


def _strip_meta(d):
    d = dict(d)
    d.pop("ResponseMetadata", None)
    return d


def verify(root: Path, sources: dict | None = None) -> list[str]:
    """Parse every body the manifest references; return a list of problems (empty = OK)."""
    import botocore.parsers
    problems = []
    manifest = json.loads((root / "manifest.json").read_text())
    assert manifest["provider"] == "aws" and manifest["settings"] == SETTINGS
    seen = set()
    ec2_model, pricing_model = _ec2_model(), _pricing_model()
    for ex in manifest["exchanges"]:
        key = (ex["host"], ex["method"], ex["path"], json.dumps(ex["match"], sort_keys=True))
        if key in seen:
            problems.append(f"duplicate exchange {key}")
        seen.add(key)
        rel = ex["response"]["body_file"]
        if not (root / rel).exists():
            problems.append(f"missing body {rel}")
            continue
        body = read_body(root, rel)
        ctype = ex["response"]["headers"]["Content-Type"]
        try:
            if rel.endswith((".csv", ".csv.gz")):
                text = body.decode()
                lines = text.split("\n")
                rows = list(csv.reader(io.StringIO(text)))
                header = rows[5]
                want = 91 if "AmazonEC2" in rel else len(CSV_DT_HEADER)
                if len(header) != want:
                    problems.append(f"{rel}: header has {len(header)} columns")
                if [r[0] for r in rows[:5]] != ["FormatVersion", "Disclaimer", "Publication Date",
                                                 "Version", "OfferCode"]:
                    problems.append(f"{rel}: bad metadata lines")
                for n, r in enumerate(rows[6:], start=7):
                    if len(r) != want:
                        problems.append(f"{rel}: line {n} has {len(r)} columns")
                        break
                for n, line in enumerate(lines[5:], start=6):
                    if not line:
                        continue
                    for field in next(csv.reader([line])):
                        pass
                    # quoting convention: every non-empty field quoted, empty ones bare
                    if ',""' in line or line.startswith('""'):
                        problems.append(f"{rel}: line {n} has a quoted empty field")
                        break
            elif ctype.startswith("text/xml"):
                op = Path(rel).name.split(".")[0]
                om = ec2_model.operation_model(op)
                parser = botocore.parsers.create_parser("ec2")
                parsed = parser.parse({"body": body, "headers": {}, "status_code": 200}, om.output_shape)
                if "ResponseMetadata" not in parsed:
                    problems.append(f"{rel}: no requestId")
                if sources is not None and _strip_meta(parsed) != sources[rel][2]:
                    problems.append(f"{rel}: botocore round-trip differs from the source dict")
            elif ctype == "application/x-amz-json-1.1":
                om = pricing_model.operation_model("GetProducts")
                parser = botocore.parsers.create_parser("json")
                parsed = parser.parse({"body": body, "headers": {}, "status_code": 200}, om.output_shape)
                if sources is not None and _strip_meta(parsed) != sources[rel][2]:
                    problems.append(f"{rel}: botocore round-trip differs from the source dict")
                for item in parsed["PriceList"]:
                    it = item if isinstance(item, dict) else json.loads(item)
                    assert {"product", "serviceCode", "terms"} <= set(it)
            else:
                json.loads(body)
        except Exception as e:  # noqa: BLE001 - report, keep checking
            problems.append(f"{rel}: {type(e).__name__}: {e}")
    total = sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
    if total > 6_500_000:
        problems.append(f"recording folder is {total} bytes (> ~6 MB)")
    return problems


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true", help="only verify the files on disk")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    if args.check:
        problems = verify(args.out)
    else:
        w = build(args.out)
        problems = verify(args.out, w.sources)
        for k, v in w.stats.items():
            print(f"{k:45s} {v}")
    total = sum(p.stat().st_size for p in args.out.rglob("*") if p.is_file())
    print(f"{'total bytes':45s} {total}")
    for p in problems:
        print("PROBLEM:", p, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
