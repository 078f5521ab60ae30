"""One person's Chromium on the desk: the few moves a person makes, each waiting for what they would see."""

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar
from urllib.parse import parse_qs, urlsplit

from selenium.common.exceptions import (
    ElementClickInterceptedException,
    NoAlertPresentException,
    StaleElementReferenceException,
)
from selenium.webdriver import Chrome
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.ui import WebDriverWait

# Long enough for password hashing and a page load on two busy cores; the live-update checks pass their own 5 s.
WAIT = 10.0
PHONE = (390, 844)  # the size issue 45 names (a current phone, upright)
T = TypeVar("T")
INJECTED = """return {
    images: document.querySelectorAll('img[src="x"]').length,
    scripts: [...document.scripts].filter(s => s.textContent.includes('__xss')).length,
    xss: typeof window.__xss,
}"""


class Browser:
    """A Chrome session of one person (`name` labels its screenshots)."""

    def __init__(self, driver: Chrome, base_url: str, name: str, shots: "Screenshots") -> None:
        self.driver, self.base_url, self.name, self.shots = driver, base_url, name, shots

    # --- going places ---

    def open(self, path: str) -> None:
        self.driver.get(self.base_url + path)

    @property
    def path(self) -> str:
        return urlsplit(self.driver.current_url).path

    @property
    def query(self) -> dict[str, list[str]]:
        return parse_qs(urlsplit(self.driver.current_url).query)

    def log_in(self, person: dict) -> None:
        """Log in through the login page and wait for the desk to greet the person by name."""
        self.open("/login")
        self.fill("Email", person["email"])
        self.fill("Password", person["password"])
        self.press("Log in")
        self.wait_for_path("/app")
        self.see(person["name"])

    def open_window(self) -> str:
        """Open another window of this browser (same cookies, same session) and switch to it."""
        self.driver.switch_to.new_window("window")
        return self.driver.current_window_handle

    def use_window(self, handle: str) -> None:
        self.driver.switch_to.window(handle)

    def wait_for_path(self, path: str, timeout: float = WAIT) -> None:
        self.wait_until(lambda: self.path == path, f"the browser to be on {path} (it is on {self.path})", timeout)

    # --- looking ---

    def see(self, text: str, timeout: float = WAIT) -> WebElement:
        """The visible element whose own text is exactly `text`."""
        return self._visible(f"//*[{own_text(text)}]", f"“{text}”", timeout)

    def see_containing(self, text: str, timeout: float = WAIT) -> WebElement:
        """The visible element with a line of its own text containing `text`."""
        locator = f"//*[text()[contains(normalize-space(.), {xpath_literal(text)})]]"
        return self._visible(locator, f"text containing “{text}”", timeout)

    def do_not_see(self, text: str, timeout: float = WAIT) -> None:
        locator = f"//*[{own_text(text)}]"
        self.wait_until(lambda: not self._shown(locator), f"“{text}” to go away", timeout)

    def texts(self, css: str) -> list[str]:
        """The rendered text of every element matching `css`, read in one go (nothing can go stale)."""
        return self.driver.execute_script(
            "return [...document.querySelectorAll(arguments[0])].map(element => element.innerText)", css
        )

    def field(self, label: str) -> WebElement:
        """The input or textarea Quasar labels `label` (it sets the label as aria-label); in the open dialog if any."""
        return self._visible(field_xpath(label), f"the field “{label}”", WAIT, displayed=False, in_dialog=True)

    def run_js(self, script: str) -> object:
        return self.driver.execute_script(script)

    def hold_as_phone(self) -> None:
        """Make the window a phone's, held upright (the browser is its usual size again for the next test)."""
        self.driver.set_window_size(*PHONE)

    def sideways_scroll(self) -> int:
        """How far the page scrolls sideways, in pixels (0: it fits the window)."""
        return self.driver.execute_script(
            "return document.documentElement.scrollWidth - document.documentElement.clientWidth"
        )

    def injected(self) -> dict:
        """What text carrying `<img src=x onerror=…>` or `<script>` that sets window.__xss left live in the page:
        such images, such scripts, and the type of window.__xss ("undefined" if none of it ran)."""
        return self.driver.execute_script(INJECTED)

    def alert_open(self) -> bool:
        try:
            self.driver.switch_to.alert  # noqa: B018 - the property raises when no alert is open
        except NoAlertPresentException:
            return False
        return True

    # --- doing ---
    # Each action finds its element and uses it in one attempt, repeated while the desk redraws what was found.

    def fill(self, label: str, text: str) -> None:
        """Replace what the field holds with `text`, typed key by key as a person would."""

        def typed() -> bool:
            element = self._find(field_xpath(label), displayed=False, in_dialog=True)
            if element is None:
                return False
            element.send_keys(Keys.CONTROL, "a")
            element.send_keys(Keys.DELETE)
            element.send_keys(text)
            return True

        self.wait_until(typed, f"typing into “{label}”")

    def choose(self, label: str, option: str) -> None:
        """Open the select labelled `label` and click `option` in its menu."""
        menu_option = f"//div[@role='listbox']//div[@role='option'][normalize-space(.)={xpath_literal(option)}]"
        self._click(f"{field_xpath(label)}/ancestor::label[1]", f"the select “{label}”")
        self._click(menu_option, f"the option “{option}” of “{label}”", in_dialog=False)  # menus open outside it
        shown = f"{field_xpath(label)}/ancestor::label[1]//*[{own_text(option)}]"
        self._visible(shown, f"“{label}” to show “{option}”", WAIT, in_dialog=True)

    def press(self, button: str) -> None:
        self._click(f"//button[.//span[{own_text(button)}]]", f"the button “{button}”")

    def click(self, text: str) -> None:
        """Click the visible element whose own text is `text`, for what is clickable but no button (a chip)."""
        self._click(f"//*[{own_text(text)}]", f"“{text}”")

    def click_link(self, text: str) -> None:
        self._click(f"//a[normalize-space(.)={xpath_literal(text)}]", f"the link “{text}”")

    def _click(self, xpath: str, what: str, *, in_dialog: bool = True) -> None:
        def clicked() -> bool:
            element = self._find(xpath, displayed=True, in_dialog=in_dialog)
            if element is None:
                return False
            element.click()
            return True

        self.wait_until(clicked, f"clicking {what}", also_ignore=(ElementClickInterceptedException,))

    @contextmanager
    def expect_notification(self, text: str, timeout: float = WAIT) -> Iterator[None]:
        """Wait, after the block, for the notification `text` to be shown once more than before it."""
        before = self._notifications(text)
        yield
        self.wait_until(
            lambda: any(times > before.get(id_, 0) for id_, times in self._notifications(text).items()),
            f"a new notification “{text}”",
            timeout,
        )

    def _notifications(self, text: str) -> dict[str, int]:
        """Open notifications reading `text`: element id → times shown (Quasar counts a repeat on a badge)."""
        shown = self.driver.execute_script(
            """return [...document.querySelectorAll('.q-notification')]
                .filter(n => n.querySelector('.q-notification__message')?.textContent.trim() === arguments[0])
                .map(n => [n, Number(n.querySelector('.q-notification__badge')?.textContent || 1)])""",
            text,
        )
        return {element.id: times for element, times in shown}

    def shoot(self, step: str) -> Path:
        return self.shots.save(self.driver, f"{self.name}-{step}")

    # --- waiting ---

    def wait_until(
        self,
        condition: Callable[[], T],
        what: str,
        timeout: float = WAIT,
        also_ignore: tuple[type[Exception], ...] = (),
    ) -> T:
        """`condition`'s first truthy answer; an element redrawn between finding and reading it just means "again"."""
        ignored = (StaleElementReferenceException, *also_ignore)
        wait = WebDriverWait(self.driver, timeout, poll_frequency=0.1, ignored_exceptions=ignored)
        return wait.until(lambda _: condition(), message=f"{self.name}: waited {timeout:g} s for {what}")

    def _visible(
        self, xpath: str, what: str, timeout: float, *, displayed: bool = True, in_dialog: bool = False
    ) -> WebElement:
        """The element `_find` finds, waiting for it (a wait never answers None: it raises when time is up)."""
        return self.wait_until(lambda: self._find(xpath, displayed=displayed, in_dialog=in_dialog), what, timeout)

    def _find(self, xpath: str, *, displayed: bool, in_dialog: bool) -> WebElement | None:
        """The first element matching `xpath`; `in_dialog`: only inside the open dialog, when one covers the page."""
        scope = self._open_dialog() if in_dialog else None
        elements = (scope or self.driver).find_elements(By.XPATH, "." + xpath)
        return next((e for e in elements if not displayed or e.is_displayed()), None)

    def _open_dialog(self) -> WebElement | None:
        dialogs = [d for d in self.driver.find_elements(By.CSS_SELECTOR, "[role='dialog']") if d.is_displayed()]
        return dialogs[-1] if dialogs else None

    def _shown(self, xpath: str) -> bool:
        return any(element.is_displayed() for element in self.driver.find_elements(By.XPATH, xpath))


class Screenshots:
    """PNGs under screenshots/ at the repo root, numbered in the order a test takes them."""

    def __init__(self, folder: Path, test_name: str) -> None:
        self.folder, self.test_name, self.count = folder, test_name, 0
        for old in folder.glob(f"{test_name}-*.png"):  # a previous run's, which would mix with these
            old.unlink()

    def save(self, driver: Chrome, label: str) -> Path:
        self.count += 1
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.folder / f"{self.test_name}-{self.count:02d}-{label}.png"
        driver.save_screenshot(str(path))
        return path


def field_xpath(label: str) -> str:
    """The input or textarea labelled `label`: Quasar sets the label as its aria-label."""
    return f"//*[self::input or self::textarea][@aria-label={xpath_literal(label)}]"


def own_text(text: str) -> str:
    """An XPath test: one of the element's own text nodes reads `text` (Vue adds empty ones as anchors)."""
    return f"text()[normalize-space(.)={xpath_literal(text)}]"


def xpath_literal(text: str) -> str:
    """`text` as an XPath 1.0 string literal (which has no escapes: split on one kind of quote)."""
    if "'" not in text:
        return f"'{text}'"
    if '"' not in text:
        return f'"{text}"'
    return "concat(" + ', "\'", '.join(f"'{part}'" for part in text.split("'")) + ")"
