"""Markdown for untrusted text (model answers): HTML escaped on the server first (DESIGN §6).

NiceGUI converts Markdown with markdown2, which passes raw HTML through; escaping before the
conversion makes every tag plain text, and DOMPurify in the browser stays as the second layer.
Images and links from model output are shown as their words only, never fetched or followed.
"""

import html
import re

from nicegui import ui

IMAGE = re.compile(r"!\[([^\]]*)\]\([^)]*\)")
LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")
REFERENCE = re.compile(r"^\s*\[[^\]]+\]:\s*\S+.*$", re.MULTILINE)


def to_safe_markdown(text: str) -> str:
    """`text` with HTML escaped and images/links reduced to their words."""
    text = REFERENCE.sub("", text)
    text = IMAGE.sub(lambda m: m.group(1), text)
    text = LINK.sub(lambda m: m.group(1), text)
    return html.escape(text, quote=False)


# code-friendly: `_` and `__` are no emphasis (`*`, `**` still are): a model names tools and fields in snake_case.
EXTRAS = ["fenced-code-blocks", "tables", "code-friendly"]


def safe_markdown(text: str = "") -> ui.markdown:
    return ui.markdown(to_safe_markdown(text), extras=EXTRAS)
