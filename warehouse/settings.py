"""Every `GPULEDGER_*` environment variable as one typed settings object, read when `load_settings()` is
called (never at import); the environment wins over per-scrape overrides. README's table lists them."""

from __future__ import annotations

import contextlib
import difflib
import logging
import os
import threading
from typing import Any, Literal

from pydantic import Field, SecretStr, ValidationError
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

log = logging.getLogger("gpuledger.settings")

ENV_PREFIX = "GPULEDGER_"
ENVIRON_READ_TRIES = 5

# Read by the test suite and the benchmarks only (never by the installed package); known here so
# that setting them does not warn as an unknown variable.
DEVELOPMENT_VARIABLES = frozenset({"GPULEDGER_BENCH_TMP", "GPULEDGER_FAULT_WORKERS", "GPULEDGER_FUZZ_EXAMPLES",
                                   "GPULEDGER_TEST_ARTIFACTS"})
# Not a setting: a refresh sets it for each child process it starts (gpuledger.children), its own pid.
PARENT_PID_VARIABLE = "GPULEDGER_PARENT_PID"


class SettingsError(ValueError):
    """A setting's value is refused; the message names its variable and what it accepts."""


class Settings(BaseSettings):
    """gpuledger's settings; `None` means "the source decides" (its docstring says how)."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, case_sensitive=False, extra="forbid",
                                      validate_default=True, allow_inf_nan=False)

    # -- the warehouse and the refresh --------------------------------------------------------
    db: str | None = None  # warehouse file; None: ./gpuledger.duckdb
    # comma list of providers whose anomalies are loaded anyway, in any case (the command line checks the names)
    accept_anomaly: str = ""
    # One offer whose price moves more than this factor either way against its current version is
    # held back at that version (the provider's other offers load): warehouse.store.hold_back_offer_jumps.
    offer_anomaly_factor: float = Field(default=5.0, gt=1)
    task_timeout_s: float = Field(default=1800.0, gt=0)
    pull_timeout_s: float = Field(default=3600.0, gt=0)  # every download of one `gpuledger pull URL`, in all
    # Prefect retries of a live provider task that crashed (not a SourceError)
    task_retries: int = Field(default=2, ge=0)
    task_runner: str = "thread"  # thread | dask (checked where the runner is made, with its own message)
    dask_address: str = ""
    dask_workers: int | None = Field(default=None, ge=1)

    # -- page sources -------------------------------------------------------------------------
    chromium_path: str | None = None  # a Chromium executable (path or name on PATH)
    chromium_no_sandbox: bool = False
    spider_log_level: str = "WARNING"
    spider_download_delay_s: float = Field(default=2.0, ge=0)
    spider_timeout_s: float | None = Field(default=None, gt=0)  # None: 60 s under replay, 300 s live
    hyperstack_render_timeout_s: float | None = Field(default=None, gt=0)  # None: 10 s under replay, 30 s live

    # -- API sources --------------------------------------------------------------------------
    # "all" or a comma list; None: the enabled commercial regions (live), all recorded (replay)
    aws_regions: str | None = None
    aws_price_source: Literal["auto", "bulk", "api"] = "auto"
    aws_ec2_api: Literal["auto", "off"] = "auto"
    aws_concurrency: int = Field(default=4, ge=1)
    # EC2 Capacity Blocks: "auto" asks every scraped region whose DescribeInstanceTypes lists a type
    # sold as capacity blocks; "off"; or a comma list of regions (those of it that are scraped)
    aws_capacity_blocks: str = "auto"
    gcp_regions: str | None = None
    gcp_project: str | None = None
    gcp_api_key: SecretStr | None = None
    max_pages: int = Field(default=500, ge=1)  # pages of one paged listing before it counts as a paging loop
    azure_regions: str | None = None
    azure_max_pages: int = Field(default=500, ge=1)  # a live GPU query is ~15 pages; more means a paging loop
    vastai_page_size: int = Field(default=1000, ge=1)
    vastai_max_pages: int = Field(default=200, ge=1)
    # USD per EUR for Scaleway's EUR prices; None: no conversion, every EUR price is quarantined.
    # The euro has traded between 0.83 (2000) and 1.60 (2008) dollars (ECB reference rates).
    scaleway_usd_per_eur: float | None = Field(default=None, ge=0.5, le=2.0)
    seeweb_usd_per_eur: float | None = Field(default=None, ge=0.5, le=2.0)  # the same for Seeweb's EUR prices

    @classmethod
    def settings_customise_sources(cls, settings_cls: type[BaseSettings], init_settings: PydanticBaseSettingsSource,
                                   env_settings: PydanticBaseSettingsSource, **_: PydanticBaseSettingsSource
                                   ) -> tuple[PydanticBaseSettingsSource, ...]:
        # The environment over per-scrape overrides; no .env or secrets-directory files.
        return env_settings, init_settings

    def accept_anomaly_names(self) -> list[str]:
        """The names `accept_anomaly` lists, as written (the command line checks them)."""
        return [p.strip() for p in self.accept_anomaly.split(",") if p.strip()]

    def accepted_anomalies(self) -> frozenset[str]:
        """The providers of `accept_anomaly`, whose names are lower case: AWS is aws."""
        return frozenset(name.lower() for name in self.accept_anomaly_names())


def env_name(field: str) -> str:
    """The environment variable of a settings field: env_name("aws_regions") == "GPULEDGER_AWS_REGIONS"."""
    if field not in Settings.model_fields:
        raise KeyError(f"no setting {field!r}")
    return ENV_PREFIX + field.upper()


_warned: set[str] = set()
_warned_lock = threading.Lock()


def warn_unknown_variables(environ: Any = None) -> list[str]:
    """Log one line naming the `GPULEDGER_*` variables that no setting reads (a typo such as
    GPULEDGER_AWS_REGION would otherwise be ignored without a word); each name once per process, and
    none in a fetch child, whose parent command has warned of the same environment already."""
    environ = os.environ if environ is None else environ
    if PARENT_PID_VARIABLE in environ:
        return []
    known = frozenset(env_name(f) for f in Settings.model_fields) | DEVELOPMENT_VARIABLES | {PARENT_PID_VARIABLE}
    unknown = sorted(n for n in list(environ) if n.upper().startswith(ENV_PREFIX) and n.upper() not in known)
    with _warned_lock:
        new = [n for n in unknown if n not in _warned]
        _warned.update(new)
    if new:
        hints, candidates = [], sorted(known)  # in order: the nearest name is the same on every run
        for name in new:
            close = difflib.get_close_matches(name.upper(), candidates, n=1)
            hints.append(f"{name} (did you mean {close[0]}?)" if close else name)
        log.warning("ignoring unknown settings: %s; README's settings table lists them all", ", ".join(hints))
    return new


def _named(loc: tuple[Any, ...]) -> str:
    name = ".".join(map(str, loc))
    return env_name(name) if name in Settings.model_fields else name


def load_settings(**overrides: Any) -> Settings:
    """The settings of this moment: environment, then `overrides`, then the defaults; SettingsError
    naming each refused variable, its value and what it accepts."""
    warn_unknown_variables()
    try:
        # pydantic-settings reads os.environ.items(), which raises KeyError when another thread removes
        # a variable in between (pytest does, per test phase): read the environment again.
        for _ in range(ENVIRON_READ_TRIES - 1):
            with contextlib.suppress(KeyError):
                return Settings(**overrides)
        return Settings(**overrides)
    except ValidationError as err:
        raise SettingsError("; ".join(f"{_named(e['loc'])}={e.get('input')!r}: {e['msg']}"
                                      for e in err.errors())) from None
