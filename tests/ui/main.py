"""The desk as NiceGUI's `user` fixture runs it: the same pages and API, on the test database."""

from nicegui import ui

from desk.web import mount

mount()
ui.run(storage_secret="the user fixture's storage secret")
