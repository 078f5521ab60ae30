"""The activity timeline of one work order: who changed what, who said what, and when; agents marked as such."""

from collections.abc import Awaitable, Callable
from datetime import datetime

from nicegui import background_tasks, ui
from pydantic import ValidationError

from components.fields import sentence
from components.formats import ago, when
from components.once import one_at_a_time
from components.work_order.drafts import Draft
from desk.labels import CHOICE_LABELS, FIELD_NAMES
from desk.work_orders.models import ActivityRead

ACTIONS = {
    "created": "created this work order",
    "updated": "changed",
    "deleted": "deleted this work order",
    "commented": "commented",
    "attached": "attached a file",
    "detached": "removed a file",
}


def timeline(
    entries: list[ActivityRead], names: dict[str, str], *, pictures: frozenset[str] | set[str] = frozenset()
) -> None:
    """Newest first; every value is shown as text; a file attached that has a thumbnail (its id in `pictures`)
    shows it."""
    if not entries:
        ui.label("No activity yet.").classes("text-grey-7")
        return
    with ui.column().classes("w-full gap-2").mark("timeline"):
        for entry in entries:
            # no-wrap, and a column that may shrink: long text wraps beside the icon, not below it
            with ui.row().classes("w-full items-start gap-2 no-wrap").mark("timeline-entry"):
                ui.icon("smart_toy" if entry.actor_kind == "system" or entry.run_id else "person").classes(
                    "text-grey-7"
                )
                with ui.column().classes("gap-0 grow min-w-0"):
                    with ui.row().classes("gap-1 items-center"):
                        ui.label(_who(entry, names)).classes("font-medium")
                        if entry.actor_kind == "system" or entry.run_id:
                            ui.badge("agent", color="purple-6").props("outline").mark("agent-badge")
                        ui.label(ACTIONS[entry.action])
                        ui.label(ago(entry.at)).classes("text-xs text-grey-7").tooltip(when(entry.at))
                    if entry.action == "commented":  # plain text: a label never renders HTML
                        ui.label(entry.text or "").classes("text-sm whitespace-pre-wrap wrap-anywhere").mark("comment")
                    elif entry.action in ("attached", "detached"):  # the file's name, as text
                        file = entry.after or {}
                        ui.label(str(file.get("name", ""))).classes("text-sm wrap-anywhere").mark("timeline-file")
                        if entry.action == "attached" and file.get("attachmentId") in pictures:  # an id the desk made
                            picture = ui.image(f"/api/v1/attachments/{file['attachmentId']}/thumbnail")
                            picture.classes("w-24 h-24 rounded").props('fit="cover"').mark("timeline-thumbnail")
                    elif entry.action == "updated":
                        for field, old, new in _changes(entry, names):
                            ui.label(f"{field}: {old} → {new}").classes(
                                "text-sm text-grey-9 wrap-anywhere whitespace-pre-wrap"
                            )


def _who(entry: ActivityRead, names: dict[str, str]) -> str:
    if entry.actor_kind == "system":
        return "Triage agent"
    name = names.get(entry.actor_id, "Someone")
    return f"Copilot for {name} (run {entry.run_id[-6:]})" if entry.run_id else name


def _changes(entry: ActivityRead, names: dict[str, str]) -> list[tuple[str, str, str]]:
    before, after = entry.before or {}, entry.after or {}
    return [
        (FIELD_NAMES.get(key, key), _value(key, before.get(key), names), _value(key, after.get(key), names))
        for key in after
    ]


def _value(field: str, value: object, names: dict[str, str]) -> str:
    if field in CHOICE_LABELS:
        return CHOICE_LABELS[field].get(str(value), str(value))
    if field == "ownerId":
        return names.get(str(value), "someone") if value else "Unassigned"
    if field == "dueAt":
        return when(value) if isinstance(value, datetime) else "no day"
    text = str(value or "")
    if not text:
        return "(empty)"  # not “”, which reads as a typo
    return f"“{text[:120]}…”" if len(text) > 120 else f"“{text}”"


def comment_box(
    on_add: Callable[[str], Awaitable[str | None]], draft: Draft, *, added: Callable[[], Awaitable[None]]
) -> ui.row:
    """A field to add a comment (the row holding it, to disable); `on_add` saves the text and returns a problem,
    `added` runs once the field is empty again.

    What is typed is kept in the browser by `draft` until it is added, and put back when the page opens
    again (after a session that ended mid-comment, a reload).
    """
    with ui.row().classes("w-full items-start gap-2") as box:
        text = ui.textarea(placeholder="Add a comment").props("autogrow counter maxlength=2000 dense outlined")
        text.props('aria-label="Add a comment"')  # its name for screen readers: a placeholder is no label
        text.classes("grow").mark("comment-text")
        text.on_value_change(lambda e: draft.track({"text": e.value} if (e.value or "").strip() else {}, 0))
        background_tasks.create(_restore(text, draft), name="restore a kept comment")

        @one_at_a_time
        async def add() -> None:
            try:
                problem = await on_add(text.value or "")
            except ValidationError as error:
                problem = " ".join(sentence(item) for item in error.errors())
            text.error = problem
            if problem is None:
                text.value = ""  # before `added` reads anything: a next comment typed meanwhile must stay
                await added()

        ui.button("Comment", on_click=add).props("outline").mark("comment-add")
    return box


async def _restore(text: ui.textarea, draft: Draft) -> None:
    await draft.client.connected()
    kept = await draft.restore()
    if kept and isinstance(kept.get("text"), str) and not text.value and not text.is_deleted:
        text.value = kept["text"]  # into the input, never into HTML
