"""A secret a provider quotes inside the data itself never enters a record.

RunPod's answer names a GPU type `displayName` with its API key in it (a server echoing the
request into a field, a misconfigured proxy): the key must reach neither `offers` nor
`offer_history`, the quarantine, the notes, nor an exported CSV. The per-provider canaries
(every registered source's key, planted in its own data) ride in tests/test_security.py's
live round, which already fetches every source with a key.
"""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

from gpuledger.adapters.base import REDACTED
from gpuledger.warehouse.export import export_snapshot
from gpuledger.warehouse.records import Batch
from gpuledger.warehouse.store import open_reader
from tests.builders import replayed_warehouse

KEY = "rpa_CANARYdata7g8h9i0j1k2l"


def test_batch_cuts_known_secrets_from_records_quarantine_and_notes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RUNPOD_API_KEY", KEY)
    b = Batch("runpod")
    assert b.offer("r1", {}, region="us", instance_type=f"1x H100 {KEY}", purchase_option="on_demand",
                   gpu_model="H100-SXM", gpu_name_reported="H100", gpu_vendor="NVIDIA", gpu_count=1,
                   price_per_hour=2.0, source_currency="USD", source_price_per_hour=2.0,
                   provider_data=json.dumps({"displayName": f"H100 {KEY}"}))
    b.quarantine("offer", f"ref-{KEY}", f"unknown GPU {KEY!r}", {"displayName": KEY})
    b.notes.append(f"skipped {KEY}")
    b.notes.extend([f"again {KEY}"])
    b.notes.insert(0, "clean")
    o, q = b.offers[0], b.quarantined[0]
    assert o.instance_type == f"1x H100 {REDACTED}"
    assert json.loads(o.provider_data) == {"displayName": f"H100 {REDACTED}"}
    assert (q.source_ref, q.reason, json.loads(q.raw)) == (f"ref-{REDACTED}", f"unknown GPU '{REDACTED}'",
                                                           {"displayName": REDACTED})
    assert b.notes == ["clean", f"skipped {REDACTED}", f"again {REDACTED}"]
    assert b.secrets_redacted == 4  # the offer, the quarantine entry, two notes


def test_runpod_key_in_display_name_reaches_no_table_and_no_export(monkeypatch: pytest.MonkeyPatch,
                                                                   tmp_path: Path) -> None:
    monkeypatch.setenv("RUNPOD_API_KEY", KEY)

    def key_in_display_name(host: str, req: object, ex: object) -> tuple[int, dict[str, str], bytes] | None:
        if ex is None:
            return None
        body = ex.body().replace(b'"MI300X"', f'"MI300X {KEY}"'.encode())  # type: ignore[attr-defined]
        return ex.status, dict(ex.headers), body  # type: ignore[attr-defined]

    db = tmp_path / "ledger.duckdb"
    replayed_warehouse(db, ["runpod"], hook=key_in_display_name, refresh_id="r-canary")
    con = open_reader(db, allow_files=True)
    try:
        folder = export_snapshot(con, tmp_path / "export", ["csv"])
    finally:
        con.close()
    con = duckdb.connect(str(db), read_only=True)
    try:
        for table in ("offers", "offer_history"):
            shown = con.execute(f"select distinct provider_data->>'display_name' from {table} "
                                "where instance_type = '1x AMD Instinct MI300X OAM'").fetchall()
            assert shown == [(f"MI300X {REDACTED}",)], table  # the planted text arrived, the key did not
        dump = "\n".join(str(con.execute(f'select * from "{t}"').fetchall()) for (t,) in con.execute(
            "select table_name from information_schema.tables").fetchall())
        notes = con.execute("select notes from scrape_runs where provider = 'runpod'").fetchone()[0]
    finally:
        con.close()
    assert KEY not in dump
    assert "held a known secret value" in notes  # said, not silent
    exported = (folder / "offers.csv").read_text()
    assert f"MI300X {REDACTED}" in exported and KEY not in exported


def test_aws_keys_read_from_the_shared_credentials_file_are_cut_too(monkeypatch: pytest.MonkeyPatch,
                                                                     tmp_path: Path) -> None:
    """boto3's chain finds the key in ~/.aws/credentials, not in the environment."""
    from gpuledger.adapters import aws
    from gpuledger.adapters.base import SourceContext, redact

    secret = "CANARYfilesecretA1b2C3d4E5f6G7h8"
    creds = tmp_path / "credentials"
    creds.write_text(f"[default]\naws_access_key_id = AKIAFILECANARY01\naws_secret_access_key = {secret}\n")
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(creds))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    assert aws.has_credentials(SourceContext(provider="aws", mode="live"))
    assert redact(f"echo {secret}", patterns=False) == f"echo {REDACTED}"
    b = Batch("aws")
    b.notes.append(f"said {secret}")
    assert b.notes == [f"said {REDACTED}"]


def test_an_azure_client_secret_quoted_back_by_its_token_endpoint_is_cut_from_the_relayed_warning(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """AZURE_CLIENT_SECRET is read by Azure's chain (EnvironmentCredential), not declared by a source. A token
    endpoint quoting it back in its error description reaches azure-identity's warning, which the fetch worker
    relays to the refresh's terminal and the flow's log: the secret must be cut there."""
    import logging

    import azure.identity
    from azure.core.exceptions import ClientAuthenticationError

    from gpuledger.adapters import azure_eviction, base
    from gpuledger.flows.fetch import _Relay

    secret = "Q7r8CANARY~azure.client-secret_x1"
    monkeypatch.setenv("AZURE_CLIENT_SECRET", secret)
    monkeypatch.setattr(base, "_registered", set())
    chained = logging.getLogger("azure.identity._credentials.chained")

    class Chain:  # what DefaultAzureCredential does when the endpoint refuses: log the chain's story, raise
        def __init__(self, **kwargs: object) -> None:
            pass

        def __enter__(self) -> "Chain":
            return self

        def __exit__(self, *exc: object) -> None:
            pass

        def get_token(self, *scopes: str) -> None:
            message = ("DefaultAzureCredential failed to retrieve a token from the included credentials.\n"
                       "Attempted credentials:\n\tEnvironmentCredential: Authentication failed: "
                       f"AADSTS7000215: Invalid client secret provided: {secret}")
            chained.warning(message)
            raise ClientAuthenticationError(message=message)

    monkeypatch.setattr(azure.identity, "DefaultAzureCredential", Chain)
    relay = _Relay()
    chained.addHandler(relay)
    try:
        token, why = azure_eviction.bearer_token(type("Live", (), {"reaches_provider": True})())
    finally:
        chained.removeHandler(relay)
    relayed = capsys.readouterr().err
    assert token is None and why is not None and secret not in why
    assert "Invalid client secret provided: [redacted]" in relayed
    assert secret not in relayed


def test_a_secret_cut_whole_is_not_cut_again_as_the_start_of_another(monkeypatch: pytest.MonkeyPatch) -> None:
    """The whole secrets were cut first, then the text's end was searched for a secret's start: the "[redacted"
    a cut left behind matched another secret beginning 'redacted' ('echo [redacted]]' in a whole run)."""
    from gpuledger.adapters import base

    monkeypatch.setattr(base, "_registered", set())
    for secret in ("CANARYfilesecretA1b2C3d4E5f6G7h8", "redacted-key-0123456789"):
        base.register_secret(secret)
    assert base.redact("echo CANARYfilesecretA1b2C3d4E5f6G7h8", patterns=False) == f"echo {REDACTED}"
    assert base.redact("echo CANARYfilesecretA1b2C3d4E5f6G7h8'", patterns=False) == f"echo {REDACTED}'"
    # a start of either secret ending a text cut short is cut, as the whole secret is
    assert base.redact("said redacted-key-01", patterns=False) == f"said {REDACTED}"
    assert base.redact("said CANARYfilesec')", patterns=False) == f"said {REDACTED}')"
    assert base.redact("said redacted-kex", patterns=False) == "said redacted-kex"  # no secret's start
