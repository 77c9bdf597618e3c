"""A customer's cart: lines, coupons, totals and the receipt."""

from decimal import Decimal

from shop.models import Coupon, Customer, Line, ModelError, product
from shop.pricing import (
    apply_discount,
    price_line,
    round_cents,
    tax_for,
)


class CartError(Exception):
    """An operation the cart refuses."""


class Cart:
    """Lines keyed by SKU, at most one coupon, and the customer they belong to."""

    MAX_LINES = 50
    MAX_QUANTITY = 999

    def __init__(self, customer=None):
        self.customer = customer or Customer("guest", "Guest", "")
        self.lines = {}
        self.coupon = None
        self.used_coupons = set()
        self.history = []

    # -- lines ------------------------------------------------------------

    def add(self, sku, quantity=1, percent=0):
        """Add `quantity` of a product; adding a SKU already there adds to its line."""
        item = product(sku)
        if sku in self.lines:
            line = self.lines[sku]
            total = quantity
            if total > self.MAX_QUANTITY:
                raise CartError(f"at most {self.MAX_QUANTITY} of {sku}")
            line.quantity = total
            line.percent = max(line.percent, percent)
        else:
            if len(self.lines) >= self.MAX_LINES:
                raise CartError(f"a cart holds at most {self.MAX_LINES} lines")
            if quantity > self.MAX_QUANTITY:
                raise CartError(f"at most {self.MAX_QUANTITY} of {sku}")
            self.lines[sku] = Line(item, quantity, percent)
        self.history.append(("add", sku, quantity))
        return self.lines[sku]

    def remove(self, sku, quantity=None):
        """Take `quantity` of a product out (all of it when None)."""
        if sku not in self.lines:
            raise CartError(f"{sku} is not in the cart")
        line = self.lines[sku]
        if quantity is None or quantity >= line.quantity:
            del self.lines[sku]
        else:
            line.quantity -= quantity
        self.history.append(("remove", sku, quantity))

    def set_quantity(self, sku, quantity):
        """Set a line's quantity; zero removes it."""
        if quantity == 0:
            self.remove(sku)
            return
        if sku not in self.lines:
            raise CartError(f"{sku} is not in the cart")
        if not 0 < quantity <= self.MAX_QUANTITY:
            raise CartError(f"quantity out of range: {quantity}")
        self.lines[sku].quantity = quantity
        self.history.append(("set", sku, quantity))

    def clear(self):
        """Empty the cart (the coupon goes too)."""
        self.lines.clear()
        self.coupon = None
        self.history.append(("clear", None, None))

    def count(self):
        """How many items, all lines together."""
        return sum(line.quantity for line in self.lines.values())

    def skus(self):
        """The SKUs in the order they were first added."""
        return list(self.lines)

    # -- coupons ----------------------------------------------------------

    def apply_coupon(self, coupon):
        """Use a coupon; a single-use one already used is refused."""
        if not isinstance(coupon, Coupon):
            raise CartError(f"not a coupon: {coupon!r}")
        if coupon.single_use and coupon.code in self.used_coupons:
            raise CartError(f"coupon {coupon.code} was already used")
        if not coupon.applies_to(self.net()):
            raise CartError(
                f"coupon {coupon.code} needs a cart of at least {coupon.minimum}"
            )
        self.coupon = coupon
        self.used_coupons.add(coupon.code)

    def drop_coupon(self):
        self.coupon = None

    # -- totals -----------------------------------------------------------

    def line_net(self, line):
        """A line's price before tax, with its own, bulk and member discounts."""
        percent = max(line.percent, self.customer.member_percent())
        return price_line(line.product.unit_price, line.quantity, percent)

    def net(self):
        """Every line's net, added up, before the coupon."""
        return sum((self.line_net(l) for l in self.lines.values()), Decimal("0"))

    def discounted_net(self):
        """The net after the coupon, if any."""
        net = self.net()
        if self.coupon is None:
            return net
        return apply_discount(net, self.coupon.percent)

    def tax(self):
        """The tax of every line at its own rate, after the coupon's share."""
        net = self.net()
        if net == 0:
            return Decimal("0")
        share = self.discounted_net() / net
        return sum(
            (
                tax_for(self.line_net(l) * share, l.product.tax_rate)
                for l in self.lines.values()
            ),
            Decimal("0"),
        )

    def total(self):
        """What the customer pays, rounded to cents."""
        return round_cents(self.discounted_net() + self.tax())

    def summary(self):
        """The totals as a dict of rounded amounts."""
        return {
            "items": self.count(),
            "net": round_cents(self.net()),
            "discounted": round_cents(self.discounted_net()),
            "tax": round_cents(self.tax()),
            "total": self.total(),
        }

    # -- receipt ----------------------------------------------------------

    def receipt_lines(self):
        """One text line per cart line: quantity, label, net."""
        out = []
        for line in self.lines.values():
            net = round_cents(self.line_net(line))
            out.append(f"{line.quantity:>3} x {line.product.label():<28} {net:>8}")
        return out

    def receipt(self):
        """The whole receipt as text."""
        s = self.summary()
        rows = self.receipt_lines()
        rows.append("-" * 44)
        if self.coupon is not None:
            rows.append(f"coupon {self.coupon.code:<30} -{self.coupon.percent}%")
        rows.append(f"{'net':<36} {s['discounted']:>7}")
        rows.append(f"{'tax':<36} {s['tax']:>7}")
        rows.append(f"{'total':<36} {s['total']:>7}")
        return "\n".join(rows)

    # -- merging ----------------------------------------------------------

    def merge(self, other):
        """Move every line of `other` into this cart (a guest cart at login)."""
        for sku, line in list(other.lines.items()):
            self.add(sku, line.quantity, line.percent)
        other.clear()

    def validate(self):
        """Check every line again (the catalogue may have changed)."""
        problems = []
        for sku, line in self.lines.items():
            try:
                product(sku)
            except ModelError as e:
                problems.append(str(e))
            if line.quantity > self.MAX_QUANTITY:
                problems.append(f"too many {sku}: {line.quantity}")
        return problems


def cart_for(customer, items):
    """A cart for `customer` holding `items`, a list of (sku, quantity)."""
    cart = Cart(customer)
    for sku, quantity in items:
        cart.add(sku, quantity)
    return cart


def cheapest_line(cart):
    """The line with the smallest net, or None for an empty cart."""
    if not cart.lines:
        return None
    return min(cart.lines.values(), key=cart.line_net)


def most_expensive_line(cart):
    """The line with the largest net, or None for an empty cart."""
    if not cart.lines:
        return None
    return max(cart.lines.values(), key=cart.line_net)
