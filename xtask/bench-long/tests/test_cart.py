import unittest
from decimal import Decimal

from shop.cart import Cart, CartError, cart_for, cheapest_line, most_expensive_line
from shop.models import Coupon, Customer, product
from shop.pricing import apply_discount, bulk_percent, price_line, round_cents


def D(text):
    return Decimal(text)


MEMBER = Customer("c1", "Ada", "ada@example.com", member=True)
GUEST = Customer("c2", "Bob", "bob@example.com")

# (sku, quantity, net after the bulk discount)
CATALOGUE_CASES = [
    ("TEA-01", 1, "4.50"),
    ("TEA-01", 12, "51.30"),
    ("TEA-02", 1, "3.90"),
    ("TEA-02", 12, "44.46"),
    ("MUG-01", 1, "8.00"),
    ("MUG-01", 12, "91.20"),
    ("POT-01", 1, "24.00"),
    ("POT-01", 12, "273.60"),
    ("BOOK-01", 1, "19.00"),
    ("BOOK-01", 12, "216.60"),
    ("SET-01", 1, "39.00"),
    ("SET-01", 12, "444.60"),
]


class PricingTest(unittest.TestCase):
    def test_no_discount(self):
        self.assertEqual(apply_discount(D("10.00"), 0), D("10.00"))

    def test_quarter_off(self):
        self.assertEqual(apply_discount(D("10.00"), 25), D("7.50"))

    def test_discount_range(self):
        with self.assertRaises(ValueError):
            apply_discount(D("10.00"), 120)

    def test_bulk_percent(self):
        self.assertEqual([bulk_percent(q) for q in (1, 10, 50)], [0, 5, 10])

    def test_price_line_bulk(self):
        self.assertEqual(round_cents(price_line(D("4.50"), 10)), D("42.75"))

    def test_catalogue_prices(self):
        for sku, quantity, want in CATALOGUE_CASES:
            with self.subTest(sku=sku, quantity=quantity):
                net = price_line(product(sku).unit_price, quantity)
                self.assertEqual(round_cents(net), D(want))

    def test_price_line_plain(self):
        self.assertEqual(round_cents(price_line(D("8.00"), 2)), D("16.00"))


class CartTest(unittest.TestCase):
    def test_add_twice_adds_up(self):
        cart = Cart(GUEST)
        cart.add("MUG-01", 2)
        cart.add("MUG-01", 3)
        self.assertEqual(cart.count(), 5)

    def test_remove_some(self):
        cart = cart_for(GUEST, [("TEA-01", 4)])
        cart.remove("TEA-01", 1)
        self.assertEqual(cart.count(), 3)

    def test_remove_missing(self):
        with self.assertRaises(CartError):
            Cart(GUEST).remove("TEA-01")

    def test_summary_guest(self):
        cart = cart_for(GUEST, [("MUG-01", 2), ("TEA-01", 1)])
        self.assertEqual(
            cart.summary(),
            {
                "items": 3,
                "net": D("20.50"),
                "discounted": D("20.50"),
                "tax": D("3.43"),
                "total": D("23.93"),
            },
        )

    def test_summary_member(self):
        cart = cart_for(MEMBER, [("POT-01", 1), ("BOOK-01", 1)])
        self.assertEqual(
            cart.summary(),
            {
                "items": 2,
                "net": D("41.71"),
                "discounted": D("41.71"),
                "tax": D("4.66"),
                "total": D("46.37"),
            },
        )

    def test_coupon(self):
        cart = cart_for(GUEST, [("SET-01", 2)])
        cart.apply_coupon(Coupon("TEN", 10, D("50")))
        self.assertEqual(cart.total(), D("84.24"))

    def test_coupon_minimum(self):
        cart = cart_for(GUEST, [("TEA-02", 1)])
        with self.assertRaises(CartError):
            cart.apply_coupon(Coupon("TEN", 10, D("50")))

    def test_receipt(self):
        cart = cart_for(GUEST, [("MUG-01", 1)])
        self.assertEqual(
            cart.receipt().splitlines(),
            [
                "  1 x Mug (MUG-01)                     8.00",
                "--------------------------------------------",
                "net                                     8.00",
                "tax                                     1.60",
                "total                                   9.60",
            ],
        )

    def test_merge(self):
        mine = cart_for(MEMBER, [("TEA-01", 2)])
        guest = cart_for(GUEST, [("TEA-01", 1), ("MUG-01", 1)])
        mine.merge(guest)
        self.assertEqual((mine.count(), guest.count()), (4, 0))
        self.assertEqual(mine.skus(), ["TEA-01", "MUG-01"])

    def test_cheapest_and_dearest(self):
        cart = cart_for(GUEST, [("TEA-02", 1), ("POT-01", 1), ("MUG-01", 1)])
        self.assertEqual(cheapest_line(cart).sku, "TEA-02")
        self.assertEqual(most_expensive_line(cart).sku, "POT-01")

    def test_bulk_line_in_cart(self):
        cart = cart_for(GUEST, [("TEA-02", 50)])
        self.assertEqual(cart.summary()["net"], D("175.50"))

    def test_set_quantity_zero_removes(self):
        cart = cart_for(GUEST, [("MUG-01", 2)])
        cart.set_quantity("MUG-01", 0)
        self.assertEqual(cart.skus(), [])

    def test_validate_clean(self):
        cart = cart_for(GUEST, [("MUG-01", 2)])
        self.assertEqual(cart.validate(), [])


if __name__ == "__main__":
    unittest.main()
