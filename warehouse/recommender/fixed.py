"""What every run pays besides training (pure): start-up, the training image and the base model down,
the result up; added to the run's hours and billed with them. Sources: docs/recommender.md, section 3."""

from __future__ import annotations

import numpy as np

GIB = 2**30
# Request to a shell on a new machine. VMs: "VMs typically boot in 1 to 2 minutes" (R. Aboukhalil,
# "Move Fast and Break the Cloud", 2018: ~25 s measured on GCP up to 32 vCPUs, under a minute to 96);
# GPU nodes are larger, so the upper end. A marketplace container starts on a host that already
# runs: its start-up is the image pull (Vast.ai: "loading: Docker image is downloading or container
# is starting up", docs.vast.ai show-instance), counted below at the host's measured speed.
BOOT_S = {"hyperscaler": 120.0, "gpu_cloud": 120.0, "aggregator": 120.0, "marketplace": 0.0}
# A CUDA PyTorch training image: codechips/vastai-fooocus measured its 7 GB image at 7-8 minutes to
# start on Vast.ai; pip's CUDA wheels alone are about 2.7 GB.
IMAGE_GB = 7.0
# huggingface_hub's Python client tops out near 500 MB/s (hf_transfer's README: "to go beyond
# ~500MB/s"): no download or upload runs faster than 4 Gb/s, whatever the machine's network.
HUB_GBPS = 4.0
# AWS: traffic through an internet gateway gets 5 Gb/s below 32 vCPUs, else 50 % of the instance's
# bandwidth (docs.aws.amazon.com/AWSEC2/latest/UserGuide/ec2-instance-network-bandwidth), applied
# to every published instance bandwidth. Without a published or measured figure: assumed (flagged).
ASSUMED_GBPS = {"hyperscaler": 5.0}
ASSUMED_OTHER_GBPS = 1.0


def internet_gbps(kind: np.ndarray, network_gbps: np.ndarray, vcpus: np.ndarray, measured_mbps: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray]:
    """(Gb/s to and from the internet, source: 0 measured, 1 published, 2 assumed) per offer; NaN
    where a figure is missing. Works on arrays and on scalars."""
    assumed = np.where(np.asarray(kind) == "hyperscaler", ASSUMED_GBPS["hyperscaler"], ASSUMED_OTHER_GBPS)
    with np.errstate(invalid="ignore"):
        share = np.where(np.nan_to_num(vcpus) >= 32, np.maximum(network_gbps * 0.5, 5.0), np.minimum(network_gbps, 5.0))
    gbps = np.where(~np.isnan(measured_mbps), measured_mbps / 1000.0, np.where(~np.isnan(network_gbps), share, assumed))
    source = np.where(~np.isnan(measured_mbps), 0, np.where(~np.isnan(network_gbps), 1, 2))
    return np.minimum(gbps, HUB_GBPS), source


def setup_seconds(boot_s: float | np.ndarray, down_gbps: float | np.ndarray, up_gbps: float | np.ndarray,
                  weights_gib: float, result_gib: float) -> float | np.ndarray:
    """Start-up + (training image + base weights) down + the result up, in seconds per run."""
    down_bits = (IMAGE_GB * 1e9 + weights_gib * GIB) * 8
    return boot_s + down_bits / (down_gbps * 1e9) + result_gib * GIB * 8 / (up_gbps * 1e9)
