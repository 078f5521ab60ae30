"""deploy/nginx.conf, run by Debian's nginx in front of desks on loopback (tests/deploy/ and bench/copilot.py).

The shipped server block is used as written; only its upstream servers and listen address are swapped
for the caller's, and a main context (pid, logs, temp paths) is wrapped around it. The access log
records, for each request, the `desk_route` cookie it came with and the upstream that served it, so a
caller can tell the processes apart. Nothing here uses pytest (see bench/harness.py).
"""

import os
import re
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from bench.harness import free_port

ROOT = Path(__file__).resolve().parents[1]
NGINX = "/usr/sbin/nginx"  # Debian's package, installed by `python3 dev.py test`
START_SECONDS = 15.0


@dataclass(frozen=True)
class Nginx:
    """nginx serving: its address, its access log, and a `desk_route` value that reaches each upstream port."""

    url: str
    port: int
    access_log: Path
    routes: dict[int, str]
    pid: int  # the master; it answers nothing itself

    @property
    def worker_pid(self) -> int:
        """The one worker process (worker_processes 1), which does the proxying: for CPU figures."""
        return int(Path(f"/proc/{self.pid}/task/{self.pid}/children").read_text().split()[0])

    def upstreams(self, cookie: str) -> set[int]:
        """The upstream ports that served requests carrying `cookie` (closed websockets included)."""
        time.sleep(0.1)  # nginx writes the access log line as the answer ends
        lines = [line.split(" ", 2) for line in self.access_log.read_text().splitlines()]
        return {int(upstream.rsplit(":", 1)[1]) for seen, upstream, _ in lines if seen == cookie and upstream != "-"}


@contextmanager
def nginx_running(folder: Path, upstreams: list[int]) -> Iterator[Nginx]:
    """deploy/nginx.conf on a free loopback port in front of `upstreams`, its files in `folder`; stopped after."""
    folder.mkdir(parents=True, exist_ok=True)
    port = free_port()
    conf = render(folder, port, upstreams)
    error_log = folder / "error.log"
    process = subprocess.Popen([NGINX, "-e", str(error_log), "-c", str(conf)])  # noqa: S603 - a fixed binary
    try:
        _wait_listening(port, process, error_log)
        url = f"http://127.0.0.1:{port}"
        access_log = folder / "access.log"
        routes = _routes(url, access_log, len(upstreams))
        yield Nginx(url=url, port=port, access_log=access_log, routes=routes, pid=process.pid)
    finally:
        _stop(process)


def render(folder: Path, port: int, upstreams: list[int]) -> Path:
    """The nginx.conf to run: the shipped server block with `upstreams` and `port`, inside a main context."""
    site = (ROOT / "deploy" / "nginx.conf").read_text()
    servers = "".join(f"    server 127.0.0.1:{upstream};\n" for upstream in upstreams)
    site, swapped = re.subn(r"^ *server web:8080;.*\n", servers, site, flags=re.MULTILINE)
    site, listened = re.subn(r"listen 80;", f"listen 127.0.0.1:{port};", site)
    if not swapped == listened == 1:
        raise RuntimeError("deploy/nginx.conf changed shape: update bench/nginx.py's rendering")
    temp = "\n".join(
        f"    {kind}_temp_path {folder / kind};" for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    conf = folder / "nginx.conf"
    conf.write_text(
        f"{'user root;' if os.geteuid() == 0 else ''}\n"
        f"daemon off;\nworker_processes 1;\npid {folder / 'nginx.pid'};\nerror_log {folder / 'error.log'} warn;\n"
        "events { worker_connections 256; }\n"
        "http {\n"
        "    log_format upstream '$cookie_desk_route $upstream_addr $request_uri';\n"
        f"    access_log {folder / 'access.log'} upstream;\n{temp}\n{site}\n}}\n"
    )
    return conf


def _routes(url: str, access_log: Path, count: int) -> dict[int, str]:
    """One desk_route value per upstream port, found by probing (the hash decides, not the caller)."""
    for n in range(40):
        httpx.get(f"{url}/healthz", cookies={"desk_route": f"probe-{n}"})
    time.sleep(0.2)
    routes: dict[int, str] = {}
    for line in access_log.read_text().splitlines():
        cookie, upstream, _ = line.split(" ", 2)
        if cookie.startswith("probe-"):
            routes.setdefault(int(upstream.rsplit(":", 1)[1]), cookie)
    if len(routes) != count:
        raise RuntimeError(f"40 probes reached {sorted(routes)}, not {count} upstreams")
    return routes


def _wait_listening(port: int, nginx: subprocess.Popen, error_log: Path) -> None:
    deadline = time.monotonic() + START_SECONDS
    while time.monotonic() < deadline:
        if nginx.poll() is not None:
            raise RuntimeError(f"nginx exited with {nginx.returncode}: {error_log.read_text(errors='replace')}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nginx did not listen within {START_SECONDS:g} s")


def _stop(nginx: subprocess.Popen) -> None:
    nginx.terminate()  # SIGTERM: nginx's fast shutdown
    try:
        nginx.wait(timeout=10)
    except subprocess.TimeoutExpired:
        nginx.kill()
        nginx.wait()
