"""The files of one work order on its page: upload (pick, take a photo, drop or paste), a gallery, the rest listed.

The uploads go to NiceGUI's upload route and from there to the attachments service, as the person: the service
decides what may be attached and answers in words shown as they are. Every name is shown as text, never markup;
the props below are constants, and the addresses of files are built from ids the desk made.
"""

from collections.abc import Awaitable, Callable

from nicegui import events, ui

from components.confirm import confirm
from components.once import one_at_a_time
from components.runtime import live
from desk.actors import Actor
from desk.attachments import service
from desk.attachments.models import MAX_PER_ORDER, AttachmentRead
from desk.attachments.sniff import KINDS
from desk.config import get_settings
from desk.db.client import get_db
from desk.errors import DeskError
from desk.work_orders.models import WorkOrderRead

ANY_FILE = 'label="Attach files" auto-upload multiple flat bordered'
PHOTO = 'label="Take or choose a photo" auto-upload flat bordered accept="image/*"'  # a phone offers its camera
# A file dropped anywhere on the page, or pasted (a screenshot), goes to the first uploader; the element's id is
# the only thing put into the script.
DROP_AND_PASTE = """
(() => {
  const uploader = () => getElement(%d)?.$refs?.qRef;
  const files = (list) => Array.from(list || []).filter((f) => f instanceof File);
  document.addEventListener("paste", (event) => {
    const pasted = files(event.clipboardData && event.clipboardData.files);
    if (pasted.length && uploader()) { event.preventDefault(); uploader().addFiles(pasted); }
  });
  document.addEventListener("dragover", (event) => event.preventDefault());
  document.addEventListener("drop", (event) => {
    if (event.target.closest && event.target.closest(".q-uploader")) return;  // the uploader takes its own
    const dropped = files(event.dataTransfer && event.dataTransfer.files);
    if (dropped.length && uploader()) { event.preventDefault(); uploader().addFiles(dropped); }
  });
})();
"""
# Quasar puts each uploader's file input inside its "+" button: a control in a control, neither named. The input,
# named after its uploader, is the one control (the element ids are the only things put into the script).
NAME_PICKERS = """
for (const id of [%d, %d]) {
  const uploader = document.getElementById("c" + id);
  const input = uploader?.querySelector("input[type=file]");
  const button = input?.closest(".q-btn");
  if (!input || !button) continue;
  input.setAttribute("aria-label", uploader.querySelector(".q-uploader__title")?.textContent || "Choose files");
  button.removeAttribute("role");
  button.removeAttribute("tabindex");
}
"""


class Files:
    """The files section: `refresh()` draws it again (a file added or removed here or on another screen)."""

    def __init__(self, actor: Callable[[], Awaitable[Actor]], order: Callable[[], WorkOrderRead]) -> None:
        self.actor, self.order = actor, order
        self.me: Actor | None = None

    async def build(self) -> None:
        self.me = await self.actor()
        ui.label("Files").classes("text-lg font-semibold mt-4")
        self.shown = ui.column().classes("w-full gap-2").mark("files")
        self.redraws = live.Redraws()
        self.dialogs = ui.element()  # outside `shown`: a refresh (this screen's or another's change) keeps them open
        if service.may_attach(self.me):
            self._uploaders()
        await self.refresh()

    def _uploaders(self) -> None:
        limit = 1024 * 1024 * get_settings_mb()
        with ui.row().classes("w-full gap-2 items-start"):
            files = ui.upload(on_upload=self._upload, on_rejected=self._rejected, max_file_size=limit)
            files.props(ANY_FILE).classes("grow").mark("upload")
            photo = ui.upload(on_upload=self._upload, on_rejected=self._rejected, max_file_size=limit)
            photo.props(PHOTO).classes("grow").mark("upload-photo")
        ui.run_javascript(DROP_AND_PASTE % files.id)
        ui.run_javascript(NAME_PICKERS % (files.id, photo.id))
        ui.label(f"Drop or paste files anywhere on the page. Up to {MAX_PER_ORDER} files of {get_settings_mb()} MB.")
        self.uploader = files

    async def _upload(self, event: events.UploadEventArguments) -> None:
        self.me = await self.actor()
        try:
            await service.upload(
                db=get_db(), actor=self.me, order_id=self.order().id, name=event.file.name, chunks=event.file.iterate()
            )
        except DeskError as error:
            ui.notify(error.message, type="negative")  # the service's words, as text
        else:
            await self.refresh()
        # Finished either way (listed now, or refused in words): off the uploader's queue, where it stood at 100 %.
        # Only the uploaded ones: Quasar's `reset` would abort a file of the same pick still on its way.
        if not event.sender.is_deleted:
            event.sender.run_method("removeUploadedFiles")

    def _rejected(self) -> None:
        ui.notify(f"A file is over {get_settings_mb()} MB; it was not attached.", type="negative")

    async def refresh(self) -> None:
        newest = self.redraws.start()
        self.me = await self.actor()
        try:
            found = await service.of_order(db=get_db(), actor=self.me, order_id=self.order().id)
        except DeskError:  # the order went, or is no longer theirs to see: the page says so
            found = []
        if self.shown.is_deleted or not newest():  # an upload's, a live change's and a thumbnail's redraws overlap:
            return  # an older read answering last would bring back a deleted file, or hide a new one
        self.shown.clear()
        with self.shown:
            pictures = [file for file in found if file.has_thumbnail]
            if pictures:
                with ui.row().classes("gap-2").mark("gallery"):
                    for file in pictures:
                        self._thumbnail(file)
            for file in found:
                if not file.has_thumbnail:
                    self._listed(file)
            if not found:
                ui.label("No files yet.").classes("text-grey-7")

    def _thumbnail(self, file: AttachmentRead) -> None:
        with ui.column().classes("gap-0 items-center"):
            image = ui.image(f"/api/v1/attachments/{file.id}/thumbnail").classes("w-32 h-32 rounded cursor-pointer")
            image.props('fit="cover"').mark("thumbnail")
            image.on("click", lambda: self._open(file))
            with ui.row().classes("gap-0 items-center no-wrap max-w-32"):
                ui.label(file.name).classes("text-xs truncate")
                self._delete_button(file)

    def _open(self, file: AttachmentRead) -> None:
        with self.dialogs, ui.dialog() as dialog, ui.card().classes("max-w-full"):
            ui.label(file.name).classes("wrap-anywhere font-medium")
            ui.image(f"/api/v1/attachments/{file.id}").classes("max-w-[90vw] max-h-[80vh]").props('fit="contain"')
            with ui.row().classes("w-full justify-end"):
                ui.link("Download", f"/api/v1/attachments/{file.id}")
                ui.button("Close", on_click=dialog.close).props("flat")
        dialog.on("hide", dialog.delete)
        dialog.open()

    def _listed(self, file: AttachmentRead) -> None:
        with ui.row().classes("w-full items-center gap-2 no-wrap").mark("file"):
            ui.icon("image" if file.content_type.startswith("image/") else "description").classes("text-grey-7")
            ui.link(file.name, f"/api/v1/attachments/{file.id}").classes("wrap-anywhere")
            ui.label(f"{KINDS.get(file.content_type, 'File')}, {size(file.size)}").classes("text-xs text-grey-7")
            self._delete_button(file)

    def _delete_button(self, file: AttachmentRead) -> None:
        if self.me is None or not service.may_delete(self.me, self.order(), file):
            return

        @one_at_a_time
        async def delete() -> None:
            with self.dialogs:
                if not await confirm(f"Delete “{file.name}”?", action="Delete", marker="confirm-delete-file"):
                    return
            self.me = await self.actor()
            try:
                await service.delete(db=get_db(), actor=self.me, attachment_id=file.id)
            except DeskError as error:
                ui.notify(error.message, type="negative")
            await self.refresh()

        ui.button(icon="delete", on_click=delete).props('flat dense round aria-label="Delete file"').mark("delete-file")


def size(count: int) -> str:
    """A file's size as people read it: 812 bytes, 48 KB, 3.2 MB."""
    if count < 1024:
        return f"{count} bytes"
    if count < 1024 * 1024:
        return f"{count / 1024:.0f} KB"
    return f"{count / 1024 / 1024:.1f} MB"


def get_settings_mb() -> int:
    return get_settings().desk_max_attachment_mb
