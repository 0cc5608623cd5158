"""The registry, the GPU reference and the recordings agree (gpuhunt-style integrity checks)."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest

from gpuledger.adapters.replay import BUNDLED_RECORDINGS, load_manifest
from gpuledger.adapters.contract import ProviderSpec
from gpuledger.adapters.registry import SOURCES, UNITS, UnknownProviderError, source_module, specs
from gpuledger.warehouse import gpus
from gpuledger.warehouse.records import ProviderFacts

TESTS = Path(__file__).parent


@pytest.mark.parametrize("provider", sorted(SOURCES))
def test_source_module_contract(provider: str) -> None:
    module = importlib.import_module(SOURCES[provider])
    assert isinstance(getattr(module, "PROVIDER", None), ProviderSpec), f"{module.__name__} declares no PROVIDER"
    assert module.PROVIDER.name == module.NAME == provider
    assert callable(module.fetch)
    # API adapters live in adapters/, page sources in spiders/
    folder = SOURCES[provider].split(".")[1]
    assert (folder, module.PROVIDER.source_kind) in {("adapters", "api"), ("spiders", "page")}, provider
    row = module.PROVIDER.facts_row()
    assert set(row) == {"provider", *ProviderFacts.model_fields}
    assert row["provider"] == provider and isinstance(row["source_urls"], list)


def test_the_registry_is_one_list_of_distinct_sources() -> None:
    assert list(SOURCES) == sorted(SOURCES)
    names = [s.display_name for s in specs()]
    assert len(names) == len(set(names)), names
    with pytest.raises(UnknownProviderError, match="unknown provider 'nosuch'; known: aws, azure"):
        source_module("nosuch")


@pytest.mark.parametrize("provider", sorted(SOURCES))
def test_every_source_has_a_documented_recording(provider: str) -> None:
    folder = BUNDLED_RECORDINGS / provider
    doc, exchanges = load_manifest(folder)  # raises if a body file is missing
    assert exchanges, provider
    assert (folder / "README.md").read_text().strip()


def test_every_registered_module_exists_once() -> None:
    modules = list(SOURCES.values()) + list(UNITS.values())  # a refresh unit declares its spec too
    assert len(modules) == len(set(modules))
    # A source module is one that declares a source; a module of shared code does not.
    declaring = {f"gpuledger.{folder}.{p.stem}" for folder in ("adapters", "spiders") for p in
                 (TESTS.parent / folder).glob("*.py") if "\nPROVIDER = ProviderSpec(" in p.read_text()}
    unregistered = sorted(declaring - set(modules))
    assert not unregistered, f"declares a source but has no line in adapters/registry.py: {unregistered}"


def test_aliases_point_at_known_models_and_models_are_sane() -> None:
    models = gpus.models()
    for a in gpus.aliases():
        assert a.gpu_model in models, a
        if a.memory_mib_min is not None and a.memory_mib_max is not None:
            assert a.memory_mib_min < a.memory_mib_max, a
    for m in models.values():
        assert m.memory_gb > 0 and m.segment in ("datacenter", "workstation", "consumer"), m


@pytest.mark.parametrize("provider, name, mib, model", [
    ("aws", "A100", 40960, "A100-SXM4-40"),
    ("aws", "A100", 81920, "A100-SXM4-80"),
    ("runpod", "NVIDIA H100 80GB HBM3", None, "H100-SXM"),
    ("vastai", "H100 SXM", None, "H100-SXM"),
    ("gcp", "H100 80GB Plus", None, "H100-SXM"),
    ("x", "H100 SXM5 80GB", None, "H100-SXM"),
    ("x", "H100 PCIe", None, "H100-PCIe"),
    ("x", "H100 NVL", None, "H100-NVL"),
    ("x", "NVIDIA GeForce RTX 4090", None, "RTX-4090"),
])
def test_one_model_under_many_names(provider: str, name: str, mib: int | None, model: str) -> None:
    assert gpus.canonicalize(provider, name, mib)[0].gpu_model == model


def test_unknown_gpu_is_never_guessed() -> None:
    with pytest.raises(gpus.UnknownGPUError, match="Z9000"):
        gpus.canonicalize("aws", "Z9000")
    with pytest.raises(gpus.UnknownGPUError):
        gpus.canonicalize("aws", "A100", 24000)  # no A100 has 24 GB: no range matches


def test_recording_manifests_are_valid_json_with_hosts() -> None:
    for manifest in BUNDLED_RECORDINGS.glob("*/manifest.json"):
        doc = json.loads(manifest.read_text())
        assert all(ex["host"] and "." in ex["host"] for ex in doc["exchanges"]), manifest
