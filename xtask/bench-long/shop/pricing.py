"""Prices: discounts, tax and rounding.

Every amount is a Decimal in the shop's currency; rounding happens once,
at the end, half up to cents.
"""

from decimal import ROUND_HALF_UP, Decimal

CENT = Decimal("0.01")
TAX_RATES = {
    "standard": Decimal("0.20"),
    "reduced": Decimal("0.05"),
    "zero": Decimal("0"),
}


def round_cents(amount):
    """Round an amount half up to whole cents."""
    return Decimal(amount).quantize(CENT, rounding=ROUND_HALF_UP)


def apply_discount(price, percent):
    """The price after taking `percent` (0-100) off."""
    if not 0 <= percent <= 100:
        raise ValueError(f"discount out of range: {percent}")
    return price * Decimal(percent) / 100


def tax_for(amount, rate_name):
    """The tax on `amount` at the named rate."""
    try:
        rate = TAX_RATES[rate_name]
    except KeyError:
        raise ValueError(f"unknown tax rate: {rate_name}") from None
    return amount * rate


def bulk_percent(quantity):
    """The volume discount for a quantity: 5% from 10, 10% from 50."""
    if quantity >= 50:
        return 10
    if quantity >= 10:
        return 5
    return 0


def price_line(unit_price, quantity, percent=0):
    """A line's price before tax: unit price times quantity, discounted."""
    gross = Decimal(unit_price) * quantity
    best = max(percent, bulk_percent(quantity))
    return apply_discount(gross, best)


def total_with_tax(net, rate_name):
    """Net plus its tax, rounded to cents."""
    return round_cents(net + tax_for(net, rate_name))
