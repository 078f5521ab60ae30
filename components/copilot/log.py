"""The conversation as a panel shows it: the person's messages, the assistant's answers (Markdown made safe,
components/safe_markdown.py), notes and errors, and the hint on a conversation not begun.

The log follows new text to the bottom unless the person scrolled up to read (then it stays put);
sending a message of one's own brings it back down (`follow_now`), to the question and its answer.
"""

from nicegui import ui

from components.safe_markdown import safe_markdown, to_safe_markdown

HINT = (
    "Ask about your work orders (what is open, what is urgent, what changed), or ask it to create, change or "
    "delete one: every change waits for your approval."
)
VIEWER_HINT = (
    "Ask about the work orders (what is open, what is urgent, what changed). As a viewer you read; it changes nothing."
)
FOLLOW_JS = """
const el = getHtmlElement(%r); if (el && !el.dataset.follow) { el.dataset.follow = '1'; let stuck = true;
el.addEventListener('scroll', () => { stuck = el.scrollHeight - el.scrollTop - el.clientHeight < 48; });
el.followNow = () => { stuck = true; el.scrollTop = el.scrollHeight; };
new MutationObserver(() => { if (stuck) el.scrollTop = el.scrollHeight; })
  .observe(el, {childList: true, subtree: true, characterData: true}); el.scrollTop = el.scrollHeight; }
"""


class ConversationLog:
    """`answer` is the assistant's answer still being streamed into, if any."""

    def __init__(self) -> None:
        self.area = ui.column().classes("copilot-log w-full gap-2 grow overflow-auto min-h-0 no-wrap")
        self.area.mark("copilot-log").props('aria-live="polite"')  # the answer is read out; the focus stays put
        self.answer: ui.markdown | None = None
        self.hint: ui.label | None = None  # what the assistant is for, on a conversation not begun

    def clear(self, *, hint_for_writer: bool | None) -> None:
        """Empty the log; with `hint_for_writer` set, a new conversation's hint (a viewer's, when False)."""
        self.area.clear()
        self.answer, self.hint = None, None
        if hint_for_writer is not None:
            with self.area:
                self.hint = ui.label(HINT if hint_for_writer else VIEWER_HINT).classes("text-sm text-grey-7")
                self.hint.mark("copilot-hint")

    def begun(self, question: str) -> None:
        """The person asked `question`: the hint has done its work."""
        if self.hint is not None:
            self.hint.delete()
            self.hint = None
        self.message("user", question)
        self.answer = None

    def message(self, role: str, text: str) -> None:
        with self.area:
            if role == "user":
                ui.label(text).classes(
                    "self-end max-w-full bg-blue-1 rounded px-3 py-2 whitespace-pre-wrap wrap-anywhere"
                )
            else:
                safe_markdown(text).classes("w-full wrap-anywhere").mark("copilot-answer")

    def item(self, kind: str, text: str) -> None:
        """One item of a turn as `LiveTurn` keeps them: user, answer, note or error."""
        if kind == "answer":
            with self.area:
                self.answer = safe_markdown(text).classes("w-full wrap-anywhere").mark("copilot-answer")
        elif kind == "user":
            self.message("user", text)
        else:
            self.answer = None
            self.note(text, error=kind == "error")

    def stream(self, text: str) -> None:
        """The answer so far, drawn into the answer being streamed (started here if there is none)."""
        if self.answer is None:
            with self.area:
                self.answer = safe_markdown().classes("w-full wrap-anywhere").mark("copilot-answer")
        self.answer.set_content(to_safe_markdown(text))

    def note(self, text: str, *, error: bool = False) -> None:
        with self.area:
            label = ui.label(text).classes("text-sm text-negative" if error else "text-sm text-grey-7")
            label.mark("copilot-error" if error else "copilot-note")

    def follow(self) -> None:
        ui.run_javascript(FOLLOW_JS % self.area.html_id)

    def follow_now(self) -> None:
        ui.run_javascript(f"getHtmlElement({self.area.html_id!r})?.followNow?.()")
