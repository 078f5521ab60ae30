"""The desk as NiceGUI's `user` fixture runs it: the same pages and API, on the test database."""

from nicegui import app, ui

from main import ROOT_PAGE, mount

# NiceGUI's reset between tests keeps FastAPI's lifespan, which every include_router wraps once
# more: without this, the wrapping nests deeper each test until Python's recursion limit.
if not hasattr(app, "pristine_lifespan"):
    app.pristine_lifespan = app.router.lifespan_context
app.router.lifespan_context = app.pristine_lifespan
mount()
ui.run(ROOT_PAGE, storage_secret="the user fixture's storage secret")
