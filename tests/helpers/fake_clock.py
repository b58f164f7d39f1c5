"""A clock the test moves by hand, for every time-limit test (issue 38, item 5): the code under
test reads it instead of the machine's clock, so what a test asserts about time holds however
loaded the machine is."""
from __future__ import annotations


class FakeClock:
    """Seconds that pass only when the test says so.

    ``clock()`` returns the current reading (``reads`` counts the calls); ``advance(s)`` moves it;
    ``sleep(s)`` moves it too and records ``s`` in ``sleeps`` (pass it where the code waits);
    ``tick``: seconds every read adds after returning (0: a still clock), for code that must see
    time pass as it polls.
    """

    def __init__(self, start: float = 0.0, tick: float = 0.0) -> None:
        self.t = float(start)
        self.tick = float(tick)
        self.reads = 0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        self.reads += 1
        now = self.t
        self.t += self.tick
        return now

    def advance(self, seconds: float) -> None:
        self.t += float(seconds)

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(float(seconds))
        self.t += float(seconds)
