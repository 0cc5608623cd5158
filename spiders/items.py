"""What a pricing-page spider yields (`PageRow`: the page's own words), and the pure helpers that read its
cells afterwards, so a unit or naming question can be answered from the crawl's item feed alone."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field, fields
from typing import Any

GPU, STORAGE, NETWORK = "gpu", "storage", "network"  # the row kinds a spider emits


@dataclass
class PageRow:
    """One priced row of a pricing page, as printed (the spiders' scrapy item)."""

    kind: str  # gpu | storage | network
    section: str  # the page's heading/tab the row sits under, e.g. "REGION: NORTH AMERICA"
    name: str  # product name as printed, e.g. "NVIDIA HGX H100"
    cells: dict[str, str] = field(default_factory=dict)  # column label -> cell text
    price_text: str = ""  # on-demand (or only) price as printed; "" when the row has none
    spot_text: str = ""  # spot price as printed, where the page shows one
    product_id: str = ""  # the page's own id for the row (a slug or data attribute)
    footnotes: list[str] = field(default_factory=list)  # texts of the footnotes the row points at
    row_index: int = 0  # position within its table, for error messages
    source_url: str = ""  # the page URL as crawled (loopback in replay)

    def raw(self) -> dict[str, Any]:
        """The row as kept with its records: the crawled URL left out (loopback under replay)."""
        return {k: v for k, v in asdict(self).items() if k != "source_url"}

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> "PageRow":
        return cls(**{k: doc[k] for k in cls.__dataclass_fields__ if k in doc})


PAGE_ROW_FIELDS = tuple(f.name for f in fields(PageRow))


class PriceTextError(ValueError):
    """A price cell says something that is neither a price nor a known 'no public price' phrase."""


# Cells that say "there is no public price here": the row is skipped, never priced.
_NO_PRICE = re.compile(r"^\s*(contact\s+(sales|us)|request\s+(access|a\s+quote)|talk\s+to\s+sales|coming\s+soon|"
                       r"n/?a|[-–—]+)\s*\.?\s*$", re.I)
_FREE = re.compile(r"^\s*(free|included|no\s+charge|\$?0(\.0+)?)\s*$", re.I)
_CURRENCY_SYMBOLS = {"$": "USD", "US$": "USD", "€": "EUR", "£": "GBP", "¥": "JPY", "₹": "INR"}
# A minus sign before the price ("-$3.20") or after its currency sign ("$-3.20"); "2-4 GPUs $3.20" is none.
_MINUS = ("-", "\u2212")
_SIGNED_AFTER_SYMBOL = re.compile(r"(US\$|\$|€|£|¥|₹)\s*[-\u2212]\s*[0-9]")
_THOUSANDS = re.compile(r"[0-9]{1,3}(,[0-9]{3})+(\.[0-9]+)?")
_RANGE_AFTER = re.compile(r"\s*(/\s*[a-z-]+\s*)?([-–—]|to\b)\s*(US\$|\$|€|£|¥|₹)?\s*[0-9]", re.I)
_MONEY = re.compile(r"(US\$|\$|€|£|¥|₹)\s*([0-9][0-9,]*(?:\.[0-9]+)?)"
                    r"|([0-9][0-9,]*(?:\.[0-9]+)?)\s*(USD|EUR|GBP)\b")


def clean_text(text: str | None) -> str:
    """Collapse whitespace (incl. non-breaking spaces) the way a reader sees the text."""
    return re.sub(r"\s+", " ", (text or "").replace("\xa0", " ")).strip()


def is_no_price(text: str) -> bool:
    """'Contact sales', 'Coming soon', '—': the page publishes no price for this row."""
    return bool(_NO_PRICE.match(clean_text(text)))


def is_free(text: str) -> bool:
    return bool(_FREE.match(clean_text(text)))


def parse_money(text: str) -> tuple[float, str] | None:
    """'$49.24/hr' -> (49.24, 'USD'); 'Contact sales' -> None; PriceTextError for anything else ('TBD')."""
    text = clean_text(text)
    if is_no_price(text):
        return None
    m = _MONEY.search(text)
    before = text[: m.start()].rstrip() if m else ""
    if (m is None and _SIGNED_AFTER_SYMBOL.search(text)) or (
            before.endswith(_MINUS) and not re.search(r"[0-9]\s*[-\u2212]$", before)):
        raise PriceTextError(f"negative price in {text!r}")
    if not m:
        raise PriceTextError(f"no price in {text!r}")
    if m.group(2) is not None:
        amount, currency = m.group(2), _CURRENCY_SYMBOLS[m.group(1)]
    else:
        amount, currency = m.group(3), m.group(4).upper()
    # '2,49' or '1.234,56' is a decimal comma (never read as 249 or 1.234); a comma groups thousands only
    if "," in amount and not _THOUSANDS.fullmatch(amount) or re.match(r",[0-9]", text[m.end():]):
        raise PriceTextError(f"decimal comma in {text!r}: not read as a price")
    if _RANGE_AFTER.match(text[m.end():]):  # '$2.10 - $2.50 / hr' is two prices, neither the price
        raise PriceTextError(f"price range in {text!r}: not read as a price")
    return float(amount.replace(",", "")), currency


def parse_number(text: str) -> float | None:
    """'2,048' -> 2048.0; '—' or '' -> None (the page gives no value)."""
    text = clean_text(text)
    if not text or is_no_price(text):
        return None
    m = re.fullmatch(r"([0-9][0-9,]*(?:\.[0-9]+)?)\s*(?:GB|GiB|TB|vCPUs?|pCPUs?|cores?)?", text, re.I)
    if not m or "," in m.group(1) and not _THOUSANDS.fullmatch(m.group(1)):  # '61,44' is a decimal comma
        raise ValueError(f"not a number: {text!r}")
    return float(m.group(1).replace(",", ""))


def cell_number(cells: dict[str, str], prefix: str) -> float | None:
    """The number in the first cell whose column label starts with `prefix` (lower case); None without one."""
    return next((parse_number(text) for label, text in cells.items() if label.lower().startswith(prefix)), None)


# Units a price can be quoted in, the longest phrase first (GiB before GB).
_UNITS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"(/|\bper\s+)\s*GiB\s*(/|\s+per\s+)\s*(mo|month)\b|/GiB-mo\b", re.I), "gib_month"),
    (re.compile(r"(/|\bper\s+)\s*GiB\s*(/|\s+per\s+)\s*(hr|hour)\b", re.I), "gib_hour"),
    (re.compile(r"(/|\bper\s+)\s*GiB\b", re.I), "gib"),
    (re.compile(r"(/|\bper\s+)\s*GB\s*(/|\s+per\s+)\s*(mo|month)\b|/GB-mo\b|per\s+GB-month", re.I), "gb_month"),
    (re.compile(r"(/|\bper\s+)\s*GB\s*(/|\s+per\s+)\s*(hr|hour)\b", re.I), "gb_hour"),
    (re.compile(r"(/|\bper\s+)\s*GB\b", re.I), "gb"),
    (re.compile(r"(/|\bper\s+)\s*(IP\s*/\s*)?(mo|month)\b", re.I), "month"),
    (re.compile(r"(/|\bper\s+)\s*(GPU\s+per\s+)?(hr|hour)\b|/\s*h\b", re.I), "hour"),
)
HOURS_PER_MONTH = 730.0  # 8760 h / 12: the convention cloud price lists use to turn hourly into monthly
GB_PER_GIB = 2**30 / 10**9  # a price per GiB is this many times the price per (decimal) GB
# Other storage units -> (hours of a month, GB per unit) that turn their price into one per GB-month.
_TO_GB_MONTH = {"gb_hour": (HOURS_PER_MONTH, 1), "gib_month": (1, GB_PER_GIB),
                "gib_hour": (HOURS_PER_MONTH, GB_PER_GIB)}


def price_unit(text: str) -> str | None:
    """'$0.070/GB/mo' -> 'gb_month'; '$3.20/hr' -> 'hour'; '$0.0001 per GB per hour' -> 'gb_hour'."""
    text = clean_text(text)
    return next((unit for pattern, unit in _UNITS if pattern.search(text)), None)


def slug(text: str) -> str:
    """'AI Object Storage — Hot' -> 'ai-object-storage-hot' (stable storage-class keys)."""
    return re.sub(r"[^a-z0-9]+", "-", clean_text(text).lower()).strip("-")


def usd_per_gb_month(text: str) -> tuple[float, str] | None:
    """A storage price as (amount per GB-month, currency), hourly at 730 h, per GiB made per GB; None for no
    public price; PriceTextError for a unit not per GB."""
    money = parse_money(text)
    if money is None:
        return None
    amount, currency = money
    unit = price_unit(text)
    if unit == "gb_month":
        return amount, currency
    if unit in _TO_GB_MONTH:
        hours, gib = _TO_GB_MONTH[unit]
        return round(amount * hours / gib, 6), currency
    raise PriceTextError(f"not a per-GB storage price: {clean_text(text)!r}")


def usd_price(text: str) -> float | None:
    """A USD amount, or None for 'no public price'; PriceTextError otherwise (a page carries no exchange rate)."""
    money = parse_money(text)
    if money is None:
        return None
    amount, currency = money
    if currency != "USD":
        raise PriceTextError(f"price {clean_text(text)!r} is in {currency}, not USD; no conversion is configured")
    return amount


def usd_per_hour(text: str, basis: str = "per hour", units: tuple[str | None, ...] = ("hour",),
                 also: str = "") -> float | None:
    """A USD price quoted in one of `units` (or words matching `also`); PriceTextError for another unit."""
    price = usd_price(text)
    if price is not None and price_unit(text) not in units and not (also and re.search(also, text, re.I)):
        raise PriceTextError(f"price {text!r} is not {basis}")
    return price
