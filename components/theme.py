"""The desk's look, the same on every page (the frame's and those without it: login, not found).

The colours meet WCAG AA contrast, and motion gives way to a person's `prefers-reduced-motion`.
"""

from nicegui import ui

PRIMARY = "#2f4f6f"  # white on it: 8.9:1
CSS = (
    # NiceGUI's link blue (#3b82f6) is 3.7:1 on white: a darker blue reads at 6.7:1 (5.9:1 on an unread row's blue)
    ".nicegui-link { color: #1d4ed8; }"
    # Quasar marks a focused button by a faint tint alone: someone on a keyboard must see where they are. A ring
    # of shadow, white then blue, shows on light and dark; an outline would lose to Quasar's `no-outline`.
    " :is(.q-btn, a, .q-item, [role=button]):focus-visible {"
    " box-shadow: 0 0 0 2px #fff, 0 0 0 4px #1d4ed8 !important; }"
    # a finger needs 44 px (WCAG 2.5.5): on a phone no button is smaller, dense or round ones included
    " @media (max-width: 639px) { .q-btn { min-height: 44px; min-width: 44px; } }"
    # Quasar's ripples, drawers, dialogs and spinners move; someone made ill or distracted by motion asked not to
    " @media (prefers-reduced-motion: reduce) { *, *::before, *::after {"
    " animation-duration: 0.01ms !important; animation-iteration-count: 1 !important;"
    " transition-duration: 0.01ms !important; scroll-behavior: auto !important; } }"
)


def page_heading(label: ui.label) -> ui.label:
    """Make `label`, the page's title as shown, its level-one heading for a screen reader."""
    return label.props('role=heading aria-level="1"')


def unseen_heading(text: str) -> ui.label:
    """A level-one heading only a screen reader finds, for a page that shows no title of its own."""
    return page_heading(ui.label(text).classes("sr-only"))


def look() -> None:
    """Give the page being built the desk's colours and its global rules."""
    ui.colors(primary=PRIMARY)
    ui.add_css(CSS)
