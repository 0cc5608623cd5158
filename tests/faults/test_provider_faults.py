"""Every provider x every fault, through the real client and the loopback replay server.

For each cell: the provider's previous rows stay byte for byte (failed load), or only the
bad records are quarantined with a reason (row-level fault), or a retry gets through
(transient error); scrape_runs says what happened; its window peers, loaded in the same
write window, load normally, and the providers outside it keep their rows; the warehouse
passes its integrity check. A fetch that raised loads in its provider's `refused` cell; its
other cells judge the one-line error of the failed run it hands over (tests/faults/harness.py).
The suite prints the provider x fault matrix at the end (tests/conftest.py).
"""

from __future__ import annotations

import pytest

from tests.faults.harness import PROVIDER_NAMES, Verdict
from tests.faults.matrix import keep
from tests.faults.providers import FAULTS, PROVIDERS

CELLS = [(p, f) for p in PROVIDER_NAMES for f in FAULTS]


@pytest.mark.parametrize(("provider", "fault"), CELLS, ids=[f"{p}-{f}" for p, f in CELLS])
def test_fault(cells, request: pytest.FixtureRequest, provider: str, fault: str) -> None:
    if PROVIDERS[provider].expected(fault) == "n/a":
        # e.g. a page layout change for a JSON API: the format has no layout. Not run, not survived.
        keep(request.node, Verdict(provider, fault, "n/a", survived=False))
        pytest.skip(f"{provider} x {fault}: not applicable to this source's format")
    verdict = cells.result(provider, fault)
    keep(request.node, verdict)
    assert verdict.survived, f"{provider} x {fault}: " + "; ".join(verdict.problems)
