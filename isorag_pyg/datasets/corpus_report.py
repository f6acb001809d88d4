"""What reading a corpus produced and what it skipped, by reason (nothing is dropped silently)."""
from __future__ import annotations

from dataclasses import dataclass, field

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
    ignored_other_files: int = 0
    split_long: list[str] = field(default_factory=list)  # passages over MAX_PASSAGE_CHARS, split

    @property
    def skipped(self) -> int:
        return len(self.skipped_binary) + len(self.skipped_undecodable) + len(self.skipped_empty)

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
        if self.ignored_other_files:
            parts.append(f"{self.ignored_other_files} file(s) other than {'/'.join(DOCUMENT_SUFFIXES)} ignored")
        return f"{self.source}: " + "; ".join(parts)
