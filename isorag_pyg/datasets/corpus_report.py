"""What reading a corpus produced and what it skipped, by reason (nothing is dropped silently)."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import PurePath

#: The document files a folder is read for.
DOCUMENT_SUFFIXES = (".txt", ".md")
#: Characters beyond which a passage of a passage file, or a document's paragraph, is split (logged): no passage
#: read is longer, and an index refuses one given directly: far beyond what an encoder reads (~1,000 characters).
MAX_PASSAGE_CHARS = 20_000


@dataclass
class CorpusReport:
    """What a corpus read produced and what it skipped, by reason."""

    source: str
    passages: int = 0
    documents: int = 0
    duplicates_merged: int = 0
    skipped_binary: list[str] = field(default_factory=list)
    skipped_undecodable: list[str] = field(default_factory=list)
    skipped_empty: list[str] = field(default_factory=list)
    ignored_other: list[str] = field(default_factory=list)  # files of a folder that are not documents (.png, .html, ...)
    split_long: list[str] = field(default_factory=list)  # passages over MAX_PASSAGE_CHARS, split
    unread_fields: Counter[str] = field(default_factory=Counter)  # text fields of passage records no passage takes, by records

    @property
    def skipped(self) -> int:
        return len(self.skipped_binary) + len(self.skipped_undecodable) + len(self.skipped_empty)

    @property
    def noteworthy(self) -> bool:
        """Whether anything was skipped, split, ignored or left unread (then the summary is a warning)."""
        return bool(self.skipped or self.split_long or self.ignored_other or self.unread_fields)

    def summary(self) -> str:
        parts = [f"{self.passages} passages"]
        if self.documents:
            parts.append(f"from {self.documents} documents")
        if self.duplicates_merged:
            parts.append(f"{self.duplicates_merged} duplicate passages merged")
        for reason, names in (("binary", self.skipped_binary), ("not UTF-8", self.skipped_undecodable), ("empty", self.skipped_empty)):
            if names:
                shown = ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")
                parts.append(f"{len(names)} {reason} file(s) skipped ({shown})")
        if self.split_long:
            shown = ", ".join(self.split_long[:3]) + (", ..." if len(self.split_long) > 3 else "")
            parts.append(f"{len(self.split_long)} passage(s) or document(s) with a paragraph over {MAX_PASSAGE_CHARS} characters split "
                         f"into passages of at most the token budget and {MAX_PASSAGE_CHARS} characters ({shown})")
        if self.ignored_other:
            kinds = Counter(PurePath(name).suffix.lower() or "no suffix" for name in self.ignored_other)
            parts.append(f"{len(self.ignored_other)} file(s) other than {'/'.join(DOCUMENT_SUFFIXES)} ignored "
                         f"({', '.join(f'{kind}: {n}' for kind, n in kinds.most_common())}; e.g. {', '.join(self.ignored_other[:3])})")
        if self.unread_fields:
            parts.append("text in fields no passage reads, ignored: " + ", ".join(f"'{name}' ({n} records)" for name, n in
                                                                                self.unread_fields.most_common())
                         + " (a passage takes title, text or paragraph_text, and id or idx)")
        return f"{self.source}: " + "; ".join(parts)
