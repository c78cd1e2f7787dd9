"""Every citation of a documentation section names a file and a heading that exist, and the
results page stays short.

Code, configs and docs cite sections as ``docs/<file>.md#<anchor>``, and docs link each other
as ``[text](<file>.md#<anchor>)``; a renamed heading or a moved page would break such a
citation without a word. An anchor is GitHub's slug of a heading (lowercase, spaces to '-',
punctuation other than '-' and '_' dropped, '-1', '-2' on repeats) or an explicit
``<a id="...">``. docs/results.md holds only the current figures, hence its line limit.
Cost: it reads a few hundred small text files, about 0.3 s.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
#: Folders whose files may cite docs; with the repository's own Markdown files (below).
SCANNED_FOLDERS = ("src", "benchmarks", "tests", "config", "launch")
SCANNED_SUFFIXES = {".py", ".md", ".yaml", ".yml", ".xml", ".txt", ".cfg", ".toml", ".sh"}
SKIPPED_PARTS = {"__pycache__", "build", "install", "log"}
RESULTS_MAX_LINES = 300

#: ``docs/<file>.md#<anchor>`` in prose, comments and strings; not a Markdown link's target, which
#: is relative to the file that holds it (LINK below).
CITATION = re.compile(r"(?<!\]\()(?<![\w./-])(docs/[\w./-]+?\.md)#([\w-]+)")
#: A Markdown link or image: ``[text](TARGET)`` or ``![alt](TARGET "title")``.
LINK = re.compile(r"\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)(?:\s+#+)?\s*$")
FENCE = re.compile(r"^ {0,3}(```|~~~)")
EXPLICIT_ANCHOR = re.compile(r"<a\s+(?:id|name)=\"([^\"]+)\"")


def slug(heading: str) -> str:
    """GitHub's anchor for a heading's text."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # links and images: their text
    text = re.sub(r"<[^>]+>", "", text)  # inline HTML
    text = re.sub(r"[^\w\- ]", "", text.strip().lower())
    return text.replace(" ", "-")


@cache
def anchors(path: Path) -> frozenset[str]:
    """Every anchor of a Markdown file: its headings' slugs (outside code) and explicit ids."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    in_fence = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if FENCE.match(line):
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        found.update(EXPLICIT_ANCHOR.findall(line))
        match = HEADING.match(line)
        if match:
            base = slug(match.group(2))
            repeat = seen.get(base, 0)
            seen[base] = repeat + 1
            found.add(base if repeat == 0 else f"{base}-{repeat}")
    return frozenset(found)


def scanned_files() -> Iterator[Path]:
    for folder in SCANNED_FOLDERS:
        for path in sorted((REPO / folder).rglob("*")):
            relative = path.relative_to(REPO).parts
            if (path.suffix in SCANNED_SUFFIXES and path.is_file()
                    and not SKIPPED_PARTS.intersection(relative)
                    and not any(part.startswith(".") for part in relative)):
                yield path
    yield from sorted(REPO.glob("*.md"))
    yield from sorted((REPO / "docs").rglob("*.md"))


def citations(path: Path) -> Iterator[tuple[int, str, Path, str]]:
    """(line, citation as written, cited file, anchor) for each section citation in a file;
    Markdown links to a file without an anchor yield the anchor ''."""
    markdown = path.suffix == ".md"
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        for match in CITATION.finditer(line):
            yield number, match.group(0), REPO / match.group(1), match.group(2)
        if not markdown:
            continue
        for match in LINK.finditer(line):
            target = match.group(1)
            if re.match(r"[a-z][a-z+.-]*:", target) or target.startswith("/"):
                continue  # a URL, mailto: or an absolute path: not a file of this repository
            file_part, _, anchor = target.partition("#")
            cited = (path.parent / file_part).resolve() if file_part else path
            if cited.suffix == ".md" or not anchor:
                yield number, target, cited, anchor


def shown(path: Path) -> str:
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)


def test_every_cited_docs_section_exists() -> None:
    problems = []
    checked = 0
    for path in scanned_files():
        for number, written, cited, anchor in citations(path):
            checked += 1
            where = f"{path.relative_to(REPO)}:{number}: {written}"
            if not cited.is_file():
                problems.append(f"{where}: no file {shown(cited)}")
            elif anchor and anchor not in anchors(cited):
                problems.append(f"{where}: {shown(cited)} has no heading or <a id> with the "
                                f"anchor #{anchor}")
    assert checked > 50, f"only {checked} citations found: the patterns no longer match the docs"
    assert not problems, "citations of missing docs sections:\n" + "\n".join(problems)


def test_results_page_stays_short() -> None:
    lines = len((REPO / "docs" / "results.md").read_text(encoding="utf-8").splitlines())
    assert lines <= RESULTS_MAX_LINES, (
        f"docs/results.md has {lines} lines (at most {RESULTS_MAX_LINES}): it holds the current "
        f"figure per question; move superseded rows to docs/history/ and explanations to "
        f"docs/performance.md")


@pytest.mark.parametrize(("heading", "anchor"), [
    ("Acting throughput", "acting-throughput"),
    ("Where the learner's time goes", "where-the-learners-time-goes"),
    ("Results — 2026-11-30, 2 vCPUs", "results--2026-11-30-2-vcpus"),
    ("Soak: `benchmarks/soak.py` (issue 41)", "soak-benchmarkssoakpy-issue-41"),
    ("See [graph.md](graph.md#x) now", "see-graphmd-now"),
])
def test_slugs_follow_github(heading: str, anchor: str) -> None:
    assert slug(heading) == anchor
