"""What ``attune ledger verify`` proves, and the anchors that let it prove more: a ledger head
(seq, hash) copied out of the ledger file, into each campaign comment and report. The chain alone
cannot show that its last events were cut off, nor that it was rewritten and every link re-hashed
after an edit; a head kept elsewhere can."""

from __future__ import annotations

import re
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field

from gate.errors import AttuneError
from gate.words import count


class Anchor(BaseModel):
    """A ledger head copied out of the ledger file (``SEQ:HASH``): in each campaign comment and
    report. A chain that still holds ``seq`` with this ``hash`` was neither cut off before it nor
    rewritten at or before it, even when every link was re-hashed after an edit."""

    model_config = ConfigDict(frozen=True)

    seq: int = Field(ge=1)
    hash: str = Field(pattern=r"^[0-9a-f]{64}$")

    @classmethod
    def parse(cls, text: str) -> Anchor:
        """``SEQ:HASH`` as printed by the report and the campaign comment."""
        found = re.fullmatch(r"\s*(\d+)\s*:\s*([0-9a-fA-F]{64})\s*", text)
        if found is None or int(found[1]) < 1:
            raise AttuneError(
                f"an anchor is SEQ:HASH (seq from 1, hash 64 hex digits), got {text!r}"
            )
        return cls(seq=int(found[1]), hash=found[2].lower())

    def __str__(self) -> str:
        return f"{self.seq}:{self.hash}"


class VerifyReport(BaseModel):
    """What ``attune ledger verify`` found."""

    ok: bool
    checked: int
    """Events whose link and hash were good, counted from seq 1."""
    first_broken_seq: int | None = None
    reason: str | None = None
    head: Anchor | None = None
    """The last event whose link and hash were good (None: an empty or broken-at-1 chain)."""
    anchors: int = 0
    """Anchors the chain was checked against (all held when ``ok``)."""
    keyed: bool = False
    """True: HMAC-SHA256 under a key kept outside the state directory (``gate.ledger_key``).
    False: plain sha256 (every ledger of attune 0.1), so a chain re-hashed after an edit is
    caught only against an anchor kept outside the file."""


def anchor_problem(hashes: dict[int, str], anchors: Sequence[Anchor]) -> tuple[int, str] | None:
    """(the first broken seq, why) for the first anchor a verified chain (seq -> hash, gapless
    from 1) does not hold, or None when it holds them all."""
    end = len(hashes)
    for anchor in anchors:
        if anchor.seq > end:
            return end + 1, (
                f"the ledger ends at seq {end}, but the anchor {anchor} names seq {anchor.seq}: "
                f"its last {count(anchor.seq - end, 'event')} "
                f"{'was' if anchor.seq - end == 1 else 'were'} cut off"
            )
        if hashes[anchor.seq] != anchor.hash:
            return anchor.seq, (
                f"seq {anchor.seq} does not hold the anchor's hash {anchor.hash[:12]}...: the "
                f"chain was rewritten and re-hashed at or before seq {anchor.seq}"
            )
    return None
