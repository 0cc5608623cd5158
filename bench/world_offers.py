"""Why the world replay loads the offers it loads: per large provider, the real size, what the
adapter makes of it, and what is left out (bench/world/README.md, "Offers at world scale").
Benchmark 1 prints it beside the offers its full refresh loaded; it is not judged."""

from __future__ import annotations

from typing import NamedTuple


class Derivation(NamedTuple):
    real_size: str
    offers: str  # how the real size becomes offers
    left_out: str  # what is not an offer, and whether that is an under-count


DERIVATIONS: dict[str, Derivation] = {
    "aws": Derivation(
        "28 commercial regions with a GPU type; 789 (GPU type, region) pairs with a Linux on-demand price",
        "each pair on demand and at 12 savings-plan terms (10,257), at 12 reserved terms where the price "
        "list has them (772-773 pairs, 9,273), and Spot per (type, AZ) from the spot history (2,176)",
        "other OS, tenancy, licence, software and capacity-reservation rows (1.13 M, the same GPUs with a "
        "licence on top) by scope; 23 type-region pairs EC2 describes but the price list does not price "
        "(g7, gr6f, p6-b300): no price, no offer"),
    "azure": Derivation(
        "9,660 GPU-family VM items in 56 regions (estimate: the low end of the live 10-20 pages)",
        "6,467 items kept: pay-as-you-go, Spot, Low Priority, 1- and 3-year reservations, and the 1,325 "
        "pay-as-you-go items' 1- and 3-year savings-plan rates as offers of their own",
        "3,012 Windows meters by scope (Linux only), 1 superseded meter, 180 items of two RTX PRO 6000 "
        "BSE v6 sizes quarantined (not yet in GPU_SIZES: an under-count until the table has them)"),
    "gcp": Derivation(
        "127 zones, 70 of them with GPUs (29 regions); the GPU machine types of each zone, N1 hosts with "
        "T4/V100/P100/P4",
        "(zone, machine type) on demand and Spot; N1 as one host shape per GPU count (8 vCPUs per GPU); "
        "committed use where the catalog has a GPU commitment SKU for the region",
        "every other N1 shape a GPU may attach to (same GPU price, other host); committed use in only "
        "3 regions: the world's catalog carries the bundle's commitment SKUs only, so live GCP would add "
        "committed-use offers in most GPU regions (an under-count of the replay, not of the adapter)"),
    "vastai": Derivation(
        "10,000 rentable listings (the issue's figure; Vast publishes no count)",
        "grouped per (canonical GPU model, GPU count, country, purchase option): 93 (model, count) pairs x "
        "28 countries x 2 options; every listing stays counted in available_count and the price spread",
        "host-level rows (20,000 listing-options) by design: they change hourly; the group's price is its "
        "cheapest listing, so a dearer but more reliable host in the same group is not an offer of its own"),
}


def offer_lines(loaded: dict[str, int]) -> list[str]:
    out = [f"  offers: {sum(loaded.values()):,} loaded; at --scale world they derive as follows"]
    for provider, d in DERIVATIONS.items():
        if provider in loaded:
            out.append(f"  {provider} {loaded[provider]:,} offers from {d.real_size}: {d.offers}; "
                       f"not offers: {d.left_out}")
    rest = {p: n for p, n in loaded.items() if p not in DERIVATIONS}
    if rest:
        out.append(f"  the other {len(rest)} providers {sum(rest.values()):,} offers (10-153 each): each "
                   "answer at its real size (bench/world/README.md)")
    return out
