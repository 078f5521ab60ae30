"""What an order's page says above the form when the order moved under the person: someone saved first (their
Save was refused), someone changed it while they typed, or it is gone."""

from collections.abc import Awaitable, Callable

from nicegui import ui


def conflict_card(
    who: str,
    lines: list[str],
    yours: list[str],
    *,
    reload: Callable[[], Awaitable[None]],
    reapply: Callable[[], Awaitable[None]],
) -> None:
    """Someone saved first: what they changed, and this tab's edit; reload their version, or apply the edit on top."""
    with ui.card().classes("w-full bg-amber-1 gap-1").mark("conflict"):
        ui.label(f"{who} saved this work order first. Nothing of yours was saved yet.").classes("font-medium")
        for line in lines:
            ui.label(line).classes("text-sm wrap-anywhere")
        _yours(yours)
        with ui.row():
            ui.button("Reload the saved version", on_click=reload).props("outline").mark("conflict-reload")
            ui.button("Apply my changes on top", on_click=reapply).mark("conflict-reapply")


def changed_elsewhere_card(
    who: str, lines: list[str], yours: list[str], *, still: bool, reload: Callable[[], Awaitable[None]]
) -> None:
    """A change made elsewhere while the person typed (`yours`: this tab's edit); `still`: whether it can be saved."""
    with ui.card().classes("w-full bg-blue-1 gap-1").mark("changed-elsewhere"):
        if still:
            ui.label(f"{who} just changed this work order. Your edit is kept until you choose.")
        else:  # Save and Delete would only be refused now
            ui.label(
                f"{who} just changed this work order, and it is no longer yours to change: your edit "
                "cannot be saved. It stays in the form for you to copy."
            ).mark("changed-elsewhere-lost")
        for line in lines:
            ui.label(line).classes("text-sm wrap-anywhere")
        _yours(yours)
        ui.button("Show the saved version (discard my edit)", on_click=reload).props("outline")


def _yours(lines: list[str]) -> None:
    """This tab's own edit, not saved: with another tab's save above it, which change is whose."""
    if lines:
        ui.label("In this tab, not saved yet:").classes("text-sm font-medium mt-1")
        for line in lines:
            ui.label(line).classes("text-sm wrap-anywhere").mark("conflict-yours")


def gone_note(*, deleted: bool) -> None:
    text = "This work order has been deleted." if deleted else "This work order is no longer yours to see."
    ui.label(text).classes("text-negative font-medium").mark("deleted")


def restored_card(discard: Callable[[], Awaitable[None]]) -> None:
    """An edit this browser kept is back in the form."""
    with ui.card().classes("w-full bg-blue-1").mark("draft-restored") as card:
        ui.label("Your unsaved edit was kept in this browser and is back in the form. Save to keep it.")

        async def discarded() -> None:
            card.delete()
            await discard()

        ui.button("Discard my edit", on_click=discarded).props("outline").mark("draft-discard")
