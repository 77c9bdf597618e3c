"""The shop's data: products, lines of a cart, and customers."""

from dataclasses import dataclass, field
from decimal import Decimal


class ModelError(ValueError):
    """A product, line or customer that cannot exist."""


@dataclass(frozen=True)
class Product:
    """Something the shop sells."""

    sku: str
    name: str
    unit_price: Decimal
    tax_rate: str = "standard"
    tags: tuple = ()

    def __post_init__(self):
        if not self.sku:
            raise ModelError("a product needs a SKU")
        if self.unit_price < 0:
            raise ModelError(f"negative price for {self.sku}: {self.unit_price}")

    def label(self):
        """The name shown on receipts."""
        return f"{self.name} ({self.sku})"


@dataclass
class Line:
    """A product in a cart, with its quantity and any line discount."""

    product: Product
    quantity: int
    percent: int = 0

    def __post_init__(self):
        if self.quantity <= 0:
            raise ModelError(f"quantity must be positive: {self.quantity}")
        if not 0 <= self.percent <= 100:
            raise ModelError(f"line discount out of range: {self.percent}")

    @property
    def sku(self):
        return self.product.sku


@dataclass
class Customer:
    """Who a cart belongs to."""

    id: str
    name: str
    email: str
    member: bool = False
    addresses: list = field(default_factory=list)

    def member_percent(self):
        """Members get 3% off every line."""
        return 3 if self.member else 0

    def primary_address(self):
        """The first address given, or None."""
        return self.addresses[0] if self.addresses else None


@dataclass
class Coupon:
    """A code taking a percentage off a whole cart above a minimum."""

    code: str
    percent: int
    minimum: Decimal = Decimal("0")
    single_use: bool = True

    def applies_to(self, net):
        return net >= self.minimum


CATALOGUE = {
    p.sku: p
    for p in [
        Product("TEA-01", "Green tea", Decimal("4.50"), "reduced", ("drink",)),
        Product("TEA-02", "Black tea", Decimal("3.90"), "reduced", ("drink",)),
        Product("MUG-01", "Mug", Decimal("8.00")),
        Product("POT-01", "Teapot", Decimal("24.00")),
        Product("BOOK-01", "Tea atlas", Decimal("19.00"), "zero", ("book",)),
        Product("SET-01", "Gift set", Decimal("39.00")),
    ]
}


def product(sku):
    """The catalogue's product with this SKU."""
    try:
        return CATALOGUE[sku]
    except KeyError:
        raise ModelError(f"no such product: {sku}") from None
