"""Views in addresses as every screen reads and writes them: a page number, a day, the last page a count
reaches, the address of a view (its filters and its page), and the note on what a link named that was left out."""

from datetime import date
from urllib.parse import urlencode

from nicegui import ui

from desk.schema import FULL_DATE, MAX_OFFSET


def page_from(text: str | None, size: int) -> int:
    """The page `?page=` names; anything that is not a page number is page 1, and deep pages stop where offsets do."""
    if not text or not text.isdecimal() or len(text) > 6:  # "²" is a digit to isdigit(), not to int()
        return 1
    return max(1, min(int(text), MAX_OFFSET // size + 1))


def day_from(text: str | None) -> date | None:
    """The day `?since=` (or any day parameter) names, as the API reads one (YYYY-MM-DD); anything else is none."""
    if not text or not FULL_DATE.match(text):  # Python alone would also take 20261201 and 2026-W48-1
        return None
    try:
        return date.fromisoformat(text)
    except ValueError:  # 2026-02-30
        return None


def last_page(total: int, size: int) -> int:
    """The last page of `total` items (1 when there are none), no deeper than offsets reach: narrow the filters."""
    return max(1, min(-(-total // size), MAX_OFFSET // size + 1))


def address(path: str, params: list[tuple[str, str]], page: int) -> str:
    """`path` with the view's non-default `params` and its page (page 1 is the plain path: nothing to say)."""
    params = [*params, ("page", str(page))] if page > 1 else params
    return path + (f"?{urlencode(params)}" if params else "")


def left_out_note(labels: list[str]) -> ui.label:
    """Says which filters a link named that this person's view could not take (by their labels); hidden when none.

    A colleague's link may name a person one cannot filter by: the view must not pass for theirs without a word.
    The page hides it once the person picks their own filters.
    """
    said = "Part of this link's view is left out, as it is not one you can use here: "
    note = ui.label(f"{said}{', '.join(labels)}.").classes("text-sm text-grey-8").mark("left-out")
    note.set_visibility(bool(labels))
    return note


def pager(last: int = 1, value: int = 1) -> ui.pagination:
    """The page numbers under a list. A click on one shows the new page from its top: the numbers are at the
    bottom, and the window stayed there, at the end of the new page (done in the browser, before the page loads)."""
    numbers = ui.pagination(1, last, direction_links=True, value=value)
    numbers.on("update:model-value", js_handler="() => window.scrollTo({top: 0})")
    return numbers
