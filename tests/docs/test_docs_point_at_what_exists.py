"""The repository explains itself: every relative link in the README and docs/ leads to a file of this
repository, and nothing sends a reader to design notes a clone does not have."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted(ROOT.glob("*/README.md"))]
# [text](target) with a relative target; anchors and absolute URLs are not files of ours.
_LINK = re.compile(r"\]\((?!https?://|mailto:|#)([^)\s]+)\)")
# Design notes that live beside the project while it is developed, not inside it.
_OUTSIDE_NOTES = re.compile(r"\.\./shared/|\bDESIGN\.md\b|\bPROTOCOLS\.md\b|\bSTYLE\.md\b")


@pytest.mark.parametrize("doc", DOCS, ids=lambda path: str(path.relative_to(ROOT)))
def test_relative_links_lead_to_existing_files(doc: Path):
    targets = [match.split("#", 1)[0] for match in _LINK.findall(doc.read_text(encoding="utf-8"))]
    missing = [target for target in targets if target and not (doc.parent / target).exists()]
    assert missing == [], f"{doc.relative_to(ROOT)} links to files that do not exist: {missing}"


def test_no_tracked_file_points_at_notes_outside_the_repository():
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    offenders = []
    for name in tracked.splitlines():
        path = ROOT / name
        if path.suffix not in {".py", ".md", ".html", ".toml", ".txt", ".sh"} or path == Path(__file__):
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        offenders += [f"{name}:{n}" for n, line in enumerate(text.splitlines(), 1) if _OUTSIDE_NOTES.search(line)]
    assert offenders == [], f"these lines point at notes a clone does not have: {offenders}"
