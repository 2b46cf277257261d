"""Request cost in integer micro-dollars.

Prices are USD per million tokens, which is the same number as micro-dollars per token.
To stay exact we convert each price once into integer *pico*-dollars per token (price x 10^6;
prices may have at most 6 decimals), multiply by integer token counts, and round each
request's total UP to a whole micro-dollar: `cost = ceil((p*in + c*out) / 10^6)`.
Rounding happens once per request, never on the running sum, so the ledger is always exactly
the sum of the per-request costs that the usage log records.
"""
from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

PICO_PER_MICRO = 1_000_000
MICRO_PER_USD = 1_000_000


@dataclass(frozen=True)
class TierPrice:
    input_pico_per_token: int
    output_pico_per_token: int


def exact_scaled(value: Any, scale: int, what: str) -> int:
    """`value * scale` as an int, refusing anything that would need rounding (floats via str)."""
    try:
        scaled = Decimal(str(value)) * scale
    except InvalidOperation:
        raise ValueError(f"{what} is not a number: {value!r}") from None
    if scaled != scaled.to_integral_value() or scaled < 0:
        raise ValueError(f"{what} must be >= 0 with at most {len(str(scale)) - 1} decimals, got {value!r}")
    return int(scaled)


def usd_to_micro(usd: Any, what: str = "amount") -> int:
    return exact_scaled(usd, MICRO_PER_USD, what)


def micro_to_usd(micro: int) -> float:
    return micro / MICRO_PER_USD


def _price_part(price: Any, part: str) -> Any:
    return price[part] if isinstance(price, dict) else getattr(price, part)


def tier_price(tier: Any) -> TierPrice:
    """Prices of one gateway tier (`tier.price_per_mtok` as a mapping or an object with input/output)."""
    price = tier["price_per_mtok"] if isinstance(tier, dict) else tier.price_per_mtok
    return TierPrice(
        exact_scaled(_price_part(price, "input"), PICO_PER_MICRO, "price_per_mtok.input"),
        exact_scaled(_price_part(price, "output"), PICO_PER_MICRO, "price_per_mtok.output"),
    )


def request_cost_micro(price: TierPrice, prompt_tokens: int, completion_tokens: int) -> int:
    pico = prompt_tokens * price.input_pico_per_token + completion_tokens * price.output_pico_per_token
    return -(-pico // PICO_PER_MICRO)  # ceiling division on integers
