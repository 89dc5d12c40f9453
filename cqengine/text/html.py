"""HTML pages as plain text: their title, and their paragraphs.

Scripts, styles, the head (but its title) and DocBook's navigation bars are dropped; block
elements (paragraphs, headings, list items, table rows, preformatted text...) end a
paragraph; entities and character references are decoded. Only the standard library.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from html.parser import HTMLParser

SKIPPED = {"script", "style", "head", "nav", "noscript", "template", "svg"}
# the boilerplate of every page: DocBook's and Publican's navigation, tables of contents
SKIPPED_CLASSES = {"navheader", "navfooter", "navigation", "docnav", "toc"}
SKIPPED_IDS = {"banner"}
BLOCKS = {
    "p", "div", "section", "article", "br", "hr", "h1", "h2", "h3", "h4", "h5", "h6",
    "li", "ul", "ol", "dl", "dt", "dd", "pre", "blockquote", "table", "tr", "td", "th",
    "caption", "figure", "figcaption", "title", "body", "html", "footer", "header",
}  # fmt: skip
VOID = {"br", "hr", "img", "meta", "link", "input", "area", "base", "col", "wbr", "source"}
_SPACE = re.compile(r"\s+")


@dataclass
class Page:
    title: str
    paragraphs: list[str]  # each non-empty, its whitespace made single spaces


class _Text(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.title: list[str] = []
        self.paragraphs: list[str] = []
        self.current: list[str] = []
        self.skipping: list[str] = []  # the open elements whose content is dropped
        self.in_title = False

    def handle_starttag(self, tag: str, attrs) -> None:
        if tag == "title":  # in the head, which is otherwise dropped
            self.in_title = True
            return
        if self.skipping:
            if tag not in VOID:
                self.skipping.append(tag)
            return
        named = dict(attrs)
        classes = set((named.get("class") or "").split())
        if tag in SKIPPED or classes & SKIPPED_CLASSES or named.get("id") in SKIPPED_IDS:
            if tag not in VOID:
                self.skipping.append(tag)
            return
        if tag in BLOCKS:
            self._end_paragraph()

    def handle_startendtag(self, tag: str, attrs) -> None:
        if not self.skipping and tag in BLOCKS:
            self._end_paragraph()

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self.in_title = False
            return
        if self.skipping:
            if tag in self.skipping:  # close up to it (tolerates unclosed children)
                while self.skipping and self.skipping.pop() != tag:
                    pass
            return
        if tag in BLOCKS:
            self._end_paragraph()

    def handle_data(self, data: str) -> None:
        if self.in_title:
            self.title.append(data)
        elif not self.skipping:
            self.current.append(data)

    def _end_paragraph(self) -> None:
        text = _SPACE.sub(" ", "".join(self.current)).strip()
        if text:
            self.paragraphs.append(text)
        self.current = []

    def close(self) -> None:
        super().close()
        self._end_paragraph()


def page(html: str) -> Page:
    """The page's title and paragraphs."""
    parser = _Text()
    parser.feed(html)
    parser.close()
    return Page(_SPACE.sub(" ", "".join(parser.title)).strip(), parser.paragraphs)


def html_to_text(html: str) -> str:
    """The page's paragraphs, one after another, a blank line between two."""
    return "\n\n".join(page(html).paragraphs)
