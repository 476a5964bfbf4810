"""Quarantine: records of a real source that cannot be read or labelled are set aside, not fatal, up to a share.

One broken record of a published corpus (a stray fragment where the answer should be, a record without its output
field) must not cost the thousands of good ones around it. A loader given a quarantine list appends such records to
it, one ``Quarantined`` entry each (source, record index or path, the record's own id if it has one, the reason),
and goes on; ``Quarantine.admit`` then checks the share of one source's records that went there against
``prepare.max_quarantine_share`` and stops the stage when it is passed, because many broken records mean a wrong
file or a changed format, not a stray record. What was quarantined is counted and listed in the family's data card.

Without a quarantine list the loaders raise on the first problem, as they always did.

Test: ``pytest tests/data/test_quarantine.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from hpcrl_core.errors import DataError

SHOWN_REASONS = 3  # reasons an error message quotes; the card lists every quarantined record


@dataclass(frozen=True)
class Quarantined:
    """One record set aside.

    Attributes:
        source: the source spec it came from, e.g. ``hpcgpt:/data/task2_c_c++.json``.
        record: its index in the file (Alpaca files) or its path under the root (DataRaceBench).
        reason: what is wrong with it, naming the field.
        id: the record's own ``id`` field, when the file gives records ids.
    """

    source: str
    record: int | str
    reason: str
    id: str | None = None

    def describe(self) -> str:
        """``record 17 (id 'x'): field 'output': ...``, as error messages and the card show it."""
        ident = f" (id {self.id!r})" if self.id is not None else ""
        return f"record {self.record}{ident}: {self.reason}"


@dataclass
class Quarantine:
    """What one family set aside, per source, under a threshold on each source's share.

    Attributes:
        max_share: the largest share of one source's records that may be quarantined
            (``prepare.max_quarantine_share``).
        sources: per source spec, ``{"records": read, "kept": loaded, "quarantined": set aside}``.
        items: every quarantined record, in source order.
    """

    max_share: float
    sources: dict[str, dict[str, int]] = field(default_factory=dict)
    items: list[Quarantined] = field(default_factory=list)

    def admit(self, source: str, kept: int, held: Sequence[Quarantined]) -> None:
        """Record what a loader kept and set aside from ``source``; fail when too much was set aside.

        Args:
            source: the source spec (``kind:PATH``).
            kept: records the loader returned.
            held: records it quarantined (every record of the source is one or the other).

        Raises:
            DataError: the quarantined share of the source exceeds ``max_share``, naming the count, the threshold and
                the first reasons.
        """
        total = kept + len(held)
        share = len(held) / total if total else 0.0
        if share > self.max_share:
            reasons = "; ".join(q.describe() for q in held[:SHOWN_REASONS])
            more = f" (and {len(held) - SHOWN_REASONS} more)" if len(held) > SHOWN_REASONS else ""
            raise DataError(
                f"{source}: {len(held)} of {total} records ({share:.1%}) cannot be read or labelled, more than "
                f"prepare.max_quarantine_share = {self.max_share} ({self.max_share:.1%} of a source's records) "
                f"allows; first reasons: {reasons}{more}. Fix or remove those records, check that the file is the "
                "one meant for this family, or raise prepare.max_quarantine_share in params.yaml")
        self.sources[source] = {"records": total, "kept": kept, "quarantined": len(held)}
        self.items.extend(held)

    def as_dict(self) -> dict[str, Any]:
        """The card's ``quarantine`` section."""
        return {"max_share": self.max_share, "count": len(self.items), "sources": dict(self.sources),
                "records": [{k: v for k, v in asdict(q).items() if v is not None} for q in self.items]}


def quarantine_markdown(section: dict[str, Any], limit: int = 50) -> list[str]:
    """Lines of the card's markdown for its ``quarantine`` section: the counts, then up to ``limit`` records."""
    lines = ["", "## Quarantine", "",
             f"- records set aside: {section['count']} (allowed: at most {section['max_share']:.1%} of each "
             "source's records)"]
    lines += [f"- {source}: {c['quarantined']} of {c['records']}" for source, c in section["sources"].items()]
    if section["records"]:
        lines += ["", "| source | record | reason |", "|---|---|---|"]
        for q in section["records"][:limit]:
            ident = f" (id {q['id']})" if "id" in q else ""
            lines.append(f"| {q['source']} | {q['record']}{ident} | {q['reason'].replace('|', '/')} |")
        if len(section["records"]) > limit:
            lines.append(f"\n({len(section['records']) - limit} more in card.json)")
    return lines
