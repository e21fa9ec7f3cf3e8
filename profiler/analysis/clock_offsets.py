"""How far another machine's clock is from ours, from round trips: each names the other clock's reading between our send and our receipt.

One round: we read our clock (t_send), ask the agent for its time.time_ns() (agent_ns), read ours again
(t_recv). The agent read its clock somewhere inside [t_send, t_recv], so its offset from us is
agent_ns - (t_send + t_recv) / 2, give or take half the round trip: the bound holds whatever the two
legs took, symmetric or not. Of several rounds the shortest bounds the offset best (NTP's minimum-delay
filter), and an offset that does not lie inside every round's bound says the clocks moved between them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ClockRound:
    """One round trip: our clock at the send and at the reply, the other clock as it answered (all ns)."""

    sent_ns: int
    remote_ns: int
    received_ns: int

    @property
    def round_trip_ns(self) -> int:
        return self.received_ns - self.sent_ns

    @property
    def offset_ns(self) -> float:
        """The other clock minus ours, at the round's midpoint."""
        return self.remote_ns - (self.sent_ns + self.received_ns) / 2

    @property
    def uncertainty_ns(self) -> float:
        """Half the round trip: the offset is inside offset_ns +- this whatever the legs took."""
        return self.round_trip_ns / 2


@dataclass(frozen=True, slots=True)
class ClockOffset:
    """The other clock minus ours (add it to our times to read them on the other clock; subtract it from the
    other's times to read them on ours), bounded by +- uncertainty_ns; `consistent` is False when the rounds'
    bounds do not overlap (a clock stepped or ran at another rate during the rounds)."""

    offset_ns: float
    uncertainty_ns: float
    rounds: int
    consistent: bool

    def to_driver_ns(self, remote_ns: int) -> int:
        """A reading of the other clock on ours."""
        return round(remote_ns - self.offset_ns)


def estimate_offset(rounds: Sequence[ClockRound]) -> ClockOffset:
    """The offset from the shortest round (ValueError with no round, or a round that ends before it starts)."""
    if not rounds:
        raise ValueError("no clock round to estimate an offset from")
    if any(one.round_trip_ns < 0 for one in rounds):
        raise ValueError("a clock round ends before it starts: our clock must not step back within a round")
    best = min(rounds, key=lambda one: one.round_trip_ns)
    low = max(one.offset_ns - one.uncertainty_ns for one in rounds)
    high = min(one.offset_ns + one.uncertainty_ns for one in rounds)
    return ClockOffset(best.offset_ns, best.uncertainty_ns, len(rounds), consistent=low <= high)
