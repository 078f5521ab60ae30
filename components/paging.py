"""Page numbers as every paged screen reads them: from an address, and the last one a count reaches."""

from desk.schema import MAX_OFFSET


def page_from(text: str | None, size: int) -> int:
    """The page `?page=` names; anything that is not a page number is page 1, and deep pages stop where offsets do."""
    if not text or not text.isdecimal() or len(text) > 6:  # "²" is a digit to isdigit(), not to int()
        return 1
    return max(1, min(int(text), MAX_OFFSET // size + 1))


def last_page(total: int, size: int) -> int:
    """The last page of `total` items (1 when there are none), no deeper than offsets reach: narrow the filters."""
    return max(1, min(-(-total // size), MAX_OFFSET // size + 1))
