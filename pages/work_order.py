"""/app/work-orders/{id}: details, the edit form, delete, the timeline, and what to do when someone saved first."""

from nicegui import APIRouter, background_tasks, ui
from nicegui.elements.mixins.disableable_element import DisableableElement
from pydantic import ValidationError

from components.agents.triage_card import triage_card
from components.confirm import confirm
from components.fields import show_problems
from components.frame import back_to_list, notify_next_page, retitle
from components.once import one_at_a_time
from components.runtime import live, session
from components.runtime.page import desk_page
from components.work_order.attachments import Files
from components.work_order.changes import changed_by, pending, what_changed, why_read_only
from components.work_order.drafts import Draft, show_kept_to_copy
from components.work_order.edit_form import EditForm
from components.work_order.notices import changed_elsewhere_card, conflict_card, gone_note, restored_card
from components.work_order.summary import History, show_summary
from components.work_order.timeline import comment_box
from desk.actors import Actor
from desk.db.client import get_db
from desk.errors import Conflict, DeskError, NotFound
from desk.work_orders import permissions, service
from desk.work_orders.models import (
    CommentCreate,
    WorkOrderRead,
    WorkOrderUpdate,
)
from desk.zone import desk_zone

router = APIRouter()


async def _read_order(me: session.SessionUser, order_id: str) -> WorkOrderRead | None:
    return await service.get(db=get_db(), actor=me.actor, order_id=order_id)


@desk_page(router, "/app/work-orders/{order_id}", title="Work order", read=_read_order)  # the form in the first paint
async def work_order_page(
    visit: session.Visit, me: session.SessionUser, found: WorkOrderRead | None, order_id: str
) -> None:
    back = ui.link("← All work orders", "/app").classes("text-sm").mark("back-to-list")
    ui.timer(0, lambda: back_to_list(back), once=True)  # to the list as this tab showed it, filters and all
    if found is None:
        ui.label("This work order does not exist, or it is not yours to see.").classes("text-lg").mark("missing")
        return
    retitle(found.title)  # the tab says which
    await WorkOrderView(visit, me.actor, found).build()


class WorkOrderView:
    """One open work order: `loaded` is the version the person sees and edits against.

    `actor` is the person as they were at their last action; every handler renews it from the visit first.
    """

    def __init__(self, visit: session.Visit, actor: Actor, order: WorkOrderRead) -> None:
        self.visit, self.actor, self.loaded = visit, actor, order
        self.form: EditForm | None = None
        self.gone = False
        self.client = ui.context.client
        self.told: int | None = None  # the newer version the person has already been told about
        # the form (and its draft) only for those who may change this order; drawn again in place if that changes
        self.editable = permissions.can_change(actor, order)

    async def build(self) -> None:
        self.save = one_at_a_time(self.save)  # the button and Ctrl+S alike: a double press saves once
        self.zone = await desk_zone(get_db())  # whose days the form's due field shows
        self.summary = ui.column().classes("w-full gap-1")
        self.notice = ui.column().classes("w-full")
        await triage_card(self.visit, lambda: self.loaded, on_conflict=self._conflict)
        self.body = ui.column().classes("w-full gap-0")
        self._draw_body()
        ui.on("desksave", self.save)  # Ctrl+S / Cmd+S
        self.files = Files(self.visit.actor, lambda: self.loaded)
        self.files_part = ui.column().classes("w-full gap-2")  # drawn after `show`: no await may come before it
        ui.label("Activity").classes("text-lg font-semibold mt-4")
        self.comment_draft = Draft(self.actor.id, self.loaded.id, part="comment")
        self.comments = comment_box(self._comment, self.comment_draft, added=lambda: self.history.show(self.actor))
        self.history = History(self.loaded.id)
        await self.show()
        with self.files_part:
            await self.files.build()
        live.on_change(self._on_changes)
        if self.editable:
            background_tasks.create(self._restore_draft(), name="restore a kept edit")
        else:  # their role was lowered, or the order handed on, while they typed, and the page was drawn again
            background_tasks.create(show_kept_to_copy(self.actor, self.loaded, self.notice), name="a kept edit")

    async def _restore_draft(self) -> None:
        """Put back an edit this browser kept (the session ended while the person typed), and say so."""
        await self.client.connected()
        kept = await self.draft.restore()
        if not kept or self.gone or self.client.is_deleted or self.edits() or self.form is None:
            return  # nothing kept, or the person began typing while the browser answered: their new text wins
        with self.client:
            self.form.put_back(kept)
            if self.edits():
                with self.notice:
                    restored_card(discard=self.show)

    def _draw_body(self) -> None:
        """The form (and its draft) for a person who may change the order, else its text and why they may not."""
        self.body.clear()
        self.form = None
        with self.body:
            if self.editable:
                self.draft = self.visit.draft = Draft(self.actor.id, self.loaded.id)
                self.form = EditForm(
                    self.loaded, save=self.save, delete=self._confirm_delete, changed=self._track, zone=self.zone
                )
            else:
                self.visit.draft = None
                self.read_only = ui.column().classes("w-full")

    async def _may_change_now(self, current: WorkOrderRead) -> None:
        """The right to change the order came or went: the form appears or goes, in place (no reload: a comment
        being typed stays, and so does what the page just said)."""
        if self.editable:
            self.draft.forget()  # what could not be saved any more (they were asked first when it was their move)
        self.editable, self.loaded = permissions.can_change(self.actor, current), current
        self.notice.clear()
        self._draw_body()
        await self.show()

    async def _adopt(self, current: WorkOrderRead, keep: dict[str, object] | None = None) -> None:
        """Edit against `current` from now on: the notice goes, and the form follows the right to change it (with
        the edits in `keep` while that right stays)."""
        if permissions.can_change(self.actor, current) != self.editable:
            await self._may_change_now(current)
            return
        self.loaded = current
        self.notice.clear()
        self._allow_saving(True)  # a change elsewhere may have taken saving away, and another given it back
        await self.show(keep=keep)  # the edit never leaves the form meanwhile

    def _allow_saving(self, allowed: bool) -> None:
        if self.form is not None:
            self.form.allow_saving(allowed)

    def _track(self) -> None:
        self.draft.track(self.edits(), self.loaded.version)

    async def show(self, keep: dict[str, object] | None = None) -> None:
        """Draw the summary, the form values and the timeline from `loaded` (the form with the edits in `keep`)."""
        order = self.loaded
        if self.form is not None:  # before any await: see components/work_order/edit_form.py
            self.form.fill(order, keep or {})
            self._track()  # an input already showing the saved value fires no change: forget the edit here
        await self._show_summary(order)
        if self.form is None:
            self.read_only.clear()
            with self.read_only:
                ui.label(order.description or "No description.").classes("whitespace-pre-wrap wrap-anywhere")
                ui.label(why_read_only(self.actor, order)).classes("text-sm text-grey-7").mark("read-only-why")
        await self.history.show(self.actor)

    async def _show_summary(self, order: WorkOrderRead) -> None:
        await show_summary(self.summary, self.visit, self.actor, order, assigned=self._assigned, unsaved=self._unsaved)

    async def _show_theirs(self, current: WorkOrderRead) -> None:
        """The order as saved now above the form and in the timeline, while the form keeps the person's edit."""
        await self._show_summary(current)
        await self.history.show(self.actor)

    def _unsaved(self) -> bool:
        return bool(self.edits())

    def edits(self) -> dict[str, object]:
        """The fields the person changed compared with `loaded` (none without a form)."""
        return self.form.edits(self.loaded) if self.form is not None else {}

    async def save(self) -> None:
        if self.gone or self.form is None:
            return
        self.actor = await self.visit.actor()
        edits = self.edits()
        if not edits:
            ui.notify("Nothing to save.")
            return
        seen = self.loaded.version
        try:
            data = WorkOrderUpdate.model_validate({"version": self.loaded.version, **edits})
            self.loaded = await service.update(db=get_db(), actor=self.actor, order_id=self.loaded.id, data=data)
        except ValidationError as error:
            show_problems(error, self.form.inputs, None)
            return
        except Conflict as conflict:
            await self._conflict(WorkOrderRead.model_validate(conflict.details["current"]), edits)
            return
        except DeskError as error:
            self._deleted() if isinstance(error, NotFound) else ui.notify(error.message, type="negative")
            return
        # Notify first: when Save came from the conflict card, clearing the notice deletes the
        # element this handler runs in, and a notification after that has nowhere to go.
        if self.loaded.version == seen:  # only spaces around the text: the order already says that
            ui.notify("Nothing to save.")
        else:
            ui.notify("Saved.", type="positive")
        self.notice.clear()
        await self.show()

    async def _conflict(self, current: WorkOrderRead, mine: dict[str, object]) -> None:
        """Someone saved first: say what they changed; let the person reload or apply their edit again."""
        who = await changed_by(self.actor, self.loaded, current)
        theirs = await what_changed(self.loaded, current, who=who)
        yours = pending(self.loaded, mine)
        await self._show_theirs(current)
        self.told = current.version
        self.notice.clear()

        async def reapply() -> None:
            self.loaded = current
            if self.form is not None:  # their version, with the person's own edits on top
                self.form.fill(current, mine)
            await self.save()

        with self.notice:
            conflict_card(who, theirs, yours, reload=lambda: self._reload(current), reapply=reapply)

    async def _reload(self, current: WorkOrderRead) -> None:
        self.actor = await self.visit.actor()
        await self._adopt(current)

    async def _comment(self, text: str) -> str | None:
        self.actor = await self.visit.actor()
        data = CommentCreate(text=text)
        try:
            await service.add_comment(db=get_db(), actor=self.actor, order_id=self.loaded.id, data=data)
        except DeskError as error:
            return error.message
        return None

    async def _assigned(self, _: WorkOrderRead) -> None:
        """After "Assign to me", "Back to the queue" or a reassignment here: draw the order as it is now.

        An unsaved edit stays in the form while the person may still save it: their move changed the owner
        alone, so the edit goes on top of the order as it is now.
        """
        edits = self.edits()
        self.actor = await self.visit.actor()
        current = await service.get(db=get_db(), actor=self.actor, order_id=self.loaded.id)
        clash = any(getattr(current, field) != getattr(self.loaded, field) for field in edits) if current else False
        if current is None:
            self._deleted()
        elif clash and permissions.can_change(self.actor, current):
            # someone else changed what the person is editing: their Save must meet it as a conflict, not undo it
            self._allow_saving(True)  # theirs to save again, if a change elsewhere had taken that away
            await self._show_theirs(current)
        else:  # a change elsewhere it told of is on screen now, under the person's edit
            await self._adopt(current, keep=edits)

    async def _on_changes(self, batch: list[dict]) -> None:
        mine = [c for c in batch if c["workOrderId"] == self.loaded.id]
        if self.gone or not mine:
            return
        commented = any(c["kind"] in ("commented", "files") for c in mine)
        if any(c["kind"] == "files" for c in mine):
            await self.files.refresh()
        if all(c["kind"] in ("commented", "files") for c in mine):  # these move no version: only the timeline
            await self.history.show(self.actor)
            return
        current = await service.get(db=get_db(), actor=self.actor, order_id=self.loaded.id)
        if self.client.is_deleted:  # the page closed while we read
            return
        if current is None:
            self._deleted(gone=any(c["kind"] == "deleted" for c in mine))
        elif permissions.can_change(self.actor, current) != self.editable and not self.edits():
            await self._may_change_now(current)  # given or taken away: the form appears or goes
        elif current.version not in (self.loaded.version, self.told):
            if self.edits():
                await self._changed_while_editing(current)
            else:
                await self._adopt(current)
        elif commented:  # with a change this page already shows (its own save, the order's creation)
            await self.history.show(self.actor)

    async def _changed_while_editing(self, current: WorkOrderRead) -> None:
        # Never clobber what the person is typing: tell them what changed, and let them choose when. What is saved
        # now is shown above the form and in the timeline (a header still showing the old version would mislead).
        # read before the check: no await may come between it and `self.told` set (a Save's card would be covered)
        who = await changed_by(self.actor, self.loaded, current)
        lines = await what_changed(self.loaded, current, who=who)
        yours = pending(self.loaded, self.edits())
        await self._show_theirs(current)
        if self.told == current.version:  # the person's Save met this change meanwhile: its conflict card stays
            return
        self.told = current.version
        self.notice.clear()
        still = permissions.can_change(self.actor, current)
        self._allow_saving(still)  # off while it could only be refused; on again when given back
        with self.notice:
            changed_elsewhere_card(who, lines, yours, still=still, reload=lambda: self._reload(current))

    def _deleted(self, *, gone: bool = True) -> None:
        self.gone = True
        if self.form is not None:
            self.draft.forget()  # nothing left to save it to
            self.form.close()
        self.comment_draft.forget()
        self.notice.clear()
        with self.notice:
            gone_note(deleted=gone)
        # nothing left to assign or comment on (the typed text stays, to be copied)
        for element in [*self.summary.descendants(), *self.comments.descendants(), *self.files_part.descendants()]:
            if isinstance(element, DisableableElement):
                element.disable()

    async def _confirm_delete(self) -> None:
        if not await confirm(
            f"Delete “{self.loaded.title}”? This cannot be undone.", action="Delete", marker="confirm-delete"
        ):
            return
        self.actor = await self.visit.actor()
        try:
            await service.delete(db=get_db(), actor=self.actor, order_id=self.loaded.id, version=self.loaded.version)
        except Conflict as conflict:
            await self._conflict(WorkOrderRead.model_validate(conflict.details["current"]), {})
            return
        except DeskError as error:
            ui.notify(error.message, type="negative")
            return
        notify_next_page(f"Deleted “{self.loaded.title}”.")  # on the list: this page is left at once
        self.draft.forget()
        ui.navigate.to(back_to_list())
