"""Every relative link of README.md and docs/*.md names a file that exists and, with #anchor, a
heading of that file under GitHub's slug rule (lowercase; drop every character but letters,
digits, spaces, - and _; spaces to -; a repeated slug gets -1, -2, ...)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import REPO

LINK = re.compile(r"\]\((?P<target>[^)\s]+)\)")
HEADING = re.compile(r"^(#{1,6})\s+(?P<text>.+?)\s*#*\s*$")
INLINE_CODE = re.compile(r"`[^`\n]*`")


def slug(heading: str) -> str:
    """GitHub's anchor of a heading's text (code spans keep their text, markup is dropped)."""
    text = re.sub(r"<!--.*?-->", "", heading).replace("`", "").lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def lines_outside_code(text: str):
    """(line number, line) of the lines outside fenced code blocks."""
    fenced = False
    for number, line in enumerate(text.splitlines(), start=1):
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
            continue
        if not fenced:
            yield number, line


def anchors(path: Path) -> set[str]:
    """The anchors a markdown file's headings define, duplicates numbered as GitHub does."""
    seen: dict[str, int] = {}
    found = set()
    for _, line in lines_outside_code(path.read_text(encoding="utf-8")):
        match = HEADING.match(line)
        if not match:
            continue
        base = slug(match.group("text"))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def broken_links(root: Path) -> list[str]:
    """'file:line: target (why)' for every relative link of the pages that does not resolve."""
    pages = [root / "README.md", *sorted((root / "docs").glob("*.md"))]
    cache: dict[Path, set[str]] = {}
    broken = []
    for page in (p for p in pages if p.is_file()):
        name = page.relative_to(root).as_posix()
        for number, line in lines_outside_code(page.read_text(encoding="utf-8")):
            for match in LINK.finditer(INLINE_CODE.sub("", line)):
                target = match.group("target")
                if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
                    continue
                file_part, _, anchor = target.partition("#")
                linked = (page.parent / file_part).resolve() if file_part else page
                if not linked.exists():
                    broken.append(f"{name}:{number}: {target} (no file {file_part})")
                    continue
                if not anchor or linked.suffix != ".md":
                    continue
                if linked not in cache:
                    cache[linked] = anchors(linked)
                if anchor not in cache[linked]:
                    broken.append(f"{name}:{number}: {target} (no heading #{anchor})")
    return broken


@pytest.mark.parametrize(
    ("heading", "expected"),
    [
        ("The length bias where it can act", "the-length-bias-where-it-can-act"),
        ("What HA-DW's difficulty anchor changes", "what-ha-dws-difficulty-anchor-changes"),
        ("Measured: the 10-seed sweep (`results/length_aware_sweep`, seeds 0-9, 60 steps)",
         "measured-the-10-seed-sweep-resultslength_aware_sweep-seeds-0-9-60-steps"),
        ("The 11-minute version (`+ length_aware_sweep_small.yaml`, seeds 0-2, 40 steps)",
         "the-11-minute-version--length_aware_sweep_smallyaml-seeds-0-2-40-steps"),
        ("lambda-GRPO's length weighting (arms `lambda_pos`, `lambda_neg`)",
         "lambda-grpos-length-weighting-arms-lambda_pos-lambda_neg"),
    ],
)
def test_slug_follows_githubs_rule(heading, expected):
    assert slug(heading) == expected


def test_a_repeated_heading_gets_a_number(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("## Measured\n\n```\n## Measured\n```\n### Measured\n## Other\n")
    assert anchors(page) == {"measured", "measured-1", "other"}


def test_broken_links_are_named_with_file_line_and_why(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("## Run time\n\ntext\n")
    (tmp_path / "README.md").write_text(
        "# T\n"
        "[ok](docs/a.md#run-time), [self](#t), [web](https://example.org/#x)\n"
        "[gone](docs/a.md#runtime) and `[code](docs/a.md#nope)`\n"
        "[missing](docs/b.md)\n"
    )
    assert broken_links(tmp_path) == [
        "README.md:3: docs/a.md#runtime (no heading #runtime)",
        "README.md:4: docs/b.md (no file docs/b.md)",
    ]


def test_every_link_of_the_readme_and_the_docs_resolves():
    assert broken_links(REPO) == []
