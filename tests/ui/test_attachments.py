"""Files on the work-order page: attach, see them listed and then as thumbnails, on another screen too; delete."""

from nicegui import ui
from nicegui.elements.upload_files import SmallFileUpload
from nicegui.testing import User

from desk import state
from desk.attachments.thumbnails import tasks as thumbnail_tasks
from desk.jobs.table import Context
from desk.jobs.worker import Worker
from tests.attachments.files import HTML, png
from tests.helpers import until
from tests.ui.conftest import WAIT, open_order


async def _attach(user: User, name: str, data: bytes, content_type: str) -> None:
    (uploader,) = user.find(marker="upload").elements
    assert isinstance(uploader, ui.upload)
    await uploader.handle_uploads([SmallFileUpload(name=name, content_type=content_type, _data=data)])


async def test_a_picture_attached_on_the_page_shows_as_a_thumbnail_on_every_open_screen(
    user: User, create_user, open_sams_order, make_user, log_in, db, clock
):
    order = await open_sams_order("Broken window")
    admin = await make_user("admin", name="Dana Admin")
    other = create_user()
    await log_in(other, admin)
    await open_order(other, order.id)

    await _attach(user, "window.png", png(), "image/png")
    await _attach(user, "notes.png", HTML, "image/png")  # markup in disguise: listed as a plain file

    await user.should_see("window.png", retries=WAIT)
    await user.should_see("File, 80 bytes")
    await other.should_see("window.png", retries=WAIT)  # live: the admin's screen shows it too
    await other.should_see("attached a file", retries=WAIT)
    worker = Worker(functions=thumbnail_tasks(), burst=True, clock=clock, poll_delay=0)
    assert await worker.run_due(Context(db=db, settings=state.current().settings)) == 1
    await other.should_see(marker="thumbnail", retries=WAIT)
    await user.should_see(marker="thumbnail", retries=WAIT)
    await user.should_see(marker="timeline-thumbnail", retries=WAIT)  # its timeline entry shows it too


async def test_the_uploader_deletes_a_file_and_the_timeline_says_so(user: User, open_sams_order):
    await open_sams_order("Broken window")
    await _attach(user, "quote.pdf", b"%PDF-1.7 a quote", "application/pdf")
    await user.should_see("PDF document, 16 bytes", retries=WAIT)

    user.find(marker="delete-file").click()
    await user.should_see(marker="confirm-delete-file", retries=WAIT)
    user.find(marker="confirm-delete-file").click()

    await user.should_see("No files yet.", retries=WAIT)
    await user.should_see("removed a file", retries=WAIT)


async def test_a_viewer_sees_the_files_but_cannot_attach(user: User, sam, make_user, make_order, log_in, db):
    order = await make_order(sam, "Broken window")
    viewer = await make_user("viewer", name="Vic Viewer")
    await log_in(user, viewer)
    await open_order(user, order.id)

    await user.should_see("No files yet.")
    await user.should_not_see(marker="upload")


async def test_a_finished_upload_leaves_the_uploaders_queue_once_it_is_listed(user: User, open_sams_order):
    """The `user` fixture runs no Quasar (tests/e2e/test_attachments.py sees the queue empty in Chromium): here, the
    page tells the uploader that took a file to drop its finished ones once the file is listed or refused, and
    never to `reset`, which would abort the rest of a pick still on its way."""
    await open_sams_order("Broken window")
    (uploader,) = user.find(marker="upload").elements
    told: list[tuple[str, bool]] = []  # (what the browser was told to run, whether the file was listed by then)
    send = user.client.outbox.enqueue_message

    def listed() -> bool:
        files = user.find(marker="files").elements.pop().descendants()
        return any(isinstance(link, ui.link) and link.text == "quote.pdf" for link in files)

    def recorded(kind, data, target) -> None:
        if kind == "run_javascript" and "runMethod" in data["code"]:
            told.append((data["code"], listed()))
        send(kind, data, target)

    user.client.outbox.enqueue_message = recorded  # type: ignore[method-assign]
    dropped = f'return runMethod({uploader.id}, "removeUploadedFiles", [])'

    await _attach(user, "quote.pdf", b"%PDF-1.7 a quote", "application/pdf")
    await user.should_see("PDF document, 16 bytes", retries=WAIT)
    await until(lambda: told != [], what="the uploader told to drop the finished file")
    assert told == [(dropped, True)]

    await _attach(user, "notes.bin", b"x" * (11 * 1024 * 1024), "application/octet-stream")  # refused: over 10 MB
    await user.should_see("The file is over 10 MB; nothing was saved.", retries=WAIT)
    await until(lambda: len(told) == 2, what="the refused file off the queue too")
    assert told[1][0] == dropped
