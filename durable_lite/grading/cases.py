"""Fresh cases for every check: a seeded source of order ids, amounts, names and the like.

A test that always asks about order "A-17" for 40 can be passed by an answer that returns
what that one case expects. So a test draws its case instead:

    @q1.test("the first call pays once and returns the provider's answer")
    def _(refund_once, open_sent, draw):
        order, amount = draw.order_id(), draw.amount()
        ...

A test that names a parameter `draw` receives a `Draw`: a `random.Random` with a few
helpers for the course's kinds of values. Every `check(...)` in a notebook draws a new
seed, so each run of a check sees new cases; the grader chooses one seed per grading run,
prints it, and derives each test's seed from it, so a run can be repeated exactly
(`python -m durable_lite.grading NOTEBOOK --seed N`). A test's seed depends on the
exercise, the question and the test's name, never on which other tests ran.

Draw values, never branches: every branch a question describes (approve, reject, expire;
audit and no audit) is exercised on every run, with drawn values inside each branch. A test
that reaches a branch only for some seeds passes a wrong answer for the others.
"""

import hashlib
import random
import secrets
import string

_WORDS = ("amber birch cedar delta ember fjord grove harbor iris juniper kestrel lagoon "
          "meadow nectar orchid pebble quartz raven sierra tundra umber violet willow "
          "yarrow zephyr").split()
_PEOPLE = ("ada alan barbara claude dorothy edsger frances grace hedy ivan joan ken "
           "linus margaret niklaus olga radia sophie tim ursula vint").split()


def derive_seed(*parts) -> int:
    """A 63-bit seed from any parts (a grading run's seed, an exercise, a question...)."""
    digest = hashlib.sha256("/".join(str(p) for p in parts).encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def fresh_seed() -> int:
    """A seed nobody chose: what `check(...)` in a notebook uses for each run."""
    return secrets.randbits(63)


class Draw(random.Random):
    """The seeded source of one test's cases. Everything `random.Random` has, plus:"""

    def __init__(self, seed: int):
        super().__init__(seed)
        self.seed = seed

    def child(self, *label) -> "Draw":
        """An independent generator for a part of the test (its values do not shift when
        another part draws more or fewer)."""
        return Draw(derive_seed(self.seed, *label))

    def order_id(self) -> str:
        """"K-4821": a capital letter, a dash, three or four digits."""
        return f"{self.choice(string.ascii_uppercase)}-{self.randint(100, 9999)}"

    def amount(self, low: int = 5, high: int = 500) -> int:
        return self.randint(low, high)

    def word(self) -> str:
        return self.choice(_WORDS)

    def person(self) -> str:
        return self.choice(_PEOPLE)

    def email(self) -> str:
        return f"{self.person()}.{self.word()}@{self.word()}.example.com"

    def token(self, n: int = 6) -> str:
        """A short random string of lowercase letters and digits."""
        return "".join(self.choice(string.ascii_lowercase + string.digits) for _ in range(n))

    def run_id(self, prefix: str = "run") -> str:
        """An id nothing has used before, so no answer can remember an earlier test's run."""
        return f"{prefix}-{self.token(8)}"

    def distinct(self, make, n: int) -> list:
        """n different values from `make()` (e.g. draw.distinct(draw.order_id, 3))."""
        seen = []
        while len(seen) < n:
            value = make()
            if value not in seen:
                seen.append(value)
        return seen

    def lookalike_pairs(self, separators=("", "-", "_", ":", "|", "/", ".", " ", ",", "+")) -> list:
        """Pairs of (a, b) inputs whose plain concatenation, with or without one of the
        common separators, is the same string: ("k1", "2") and ("k", "12"); ("k-x", "y") and
        ("k", "x-y"). A key or a row that joins its parts that way cannot tell them apart."""
        pairs = []
        for sep in separators:
            left, middle, right = self.token(3), self.token(2), self.token(3)
            pairs.append(((f"{left}{sep}{middle}", right), (left, f"{middle}{sep}{right}")))
        return pairs
