"""The documentation site: `mkdocs build --strict` builds it; every internal link and anchor of
the built site resolves; headless Chromium renders the home page and a reference page, with
their pictures served; the quickstart's pictures in docs/ are what the quickstart draws."""

from __future__ import annotations

import functools
import hashlib
import http.server
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urljoin, urlsplit
from urllib.request import urlopen

import pytest
from conftest import QUICKSTART, ROOT, cli

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site, built into a temporary folder."""
    if shutil.which("mkdocs", path=str(Path(sys.executable).parent)) is None:
        pytest.skip("mkdocs is not installed beside this interpreter (scripts/setup.sh installs it)")
    out = tmp_path_factory.mktemp("site")
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    env["PYTHONPATH"] = os.pathsep.join(p for p in [str(ROOT / "python"), env.get("PYTHONPATH", "")] if p)
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return out


class _Links(HTMLParser):
    """The ids, links and images of one page."""

    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.links: list[str] = []
        self.images: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        for key in ("id", "name"):
            if a.get(key) and (key == "id" or tag == "a"):
                self.ids.add(str(a[key]))
        if tag == "a" and a.get("href"):
            self.links.append(str(a["href"]))
        if tag in ("img", "script") and a.get("src"):
            self.images.append(str(a["src"]))
        if tag == "link" and a.get("href"):
            self.links.append(str(a["href"]))


@functools.cache
def _parse(path: Path) -> _Links:
    p = _Links()
    p.feed(path.read_text(encoding="utf-8"))
    return p


def _target(site: Path, page: Path, href: str) -> tuple[Path, str] | None:
    """The file and fragment an internal link points to; None for an external one."""
    parts = urlsplit(href)
    if parts.scheme or parts.netloc or href.startswith(("mailto:", "javascript:")):
        return None
    page_url = "/" + page.relative_to(site).as_posix()
    url = urlsplit(urljoin(page_url, unquote(parts.path))) if parts.path else urlsplit(page_url)
    path = site / url.path.lstrip("/")
    if url.path.endswith("/") or path.is_dir():
        path = path / "index.html"
    return path, parts.fragment


def test_every_internal_link_and_anchor_resolves(site: Path) -> None:
    pages = sorted(site.rglob("*.html"))
    assert len(pages) >= 30
    broken = []
    for page in pages:
        parsed = _parse(page)
        for href in parsed.links + parsed.images:
            target = _target(site, page, href)
            if target is None:
                continue
            path, fragment = target
            where = f"{page.relative_to(site)}: {href}"
            if not path.is_file():
                broken.append(f"{where} (no {path.relative_to(site)})")
            elif fragment and path.suffix == ".html" and fragment not in _parse(path).ids:
                broken.append(f"{where} (no anchor #{fragment})")
    assert not broken, "\n".join(broken)


def test_the_generated_references_hold_every_key_and_command(site: Path) -> None:
    import json

    from critmem.cli import build_parser

    scenario = (site / "reference" / "scenario" / "index.html").read_text(encoding="utf-8")
    schema = json.loads((ROOT / "docs" / "scenario.schema.json").read_text(encoding="utf-8"))
    for node in [schema, *schema["$defs"].values()]:
        for key in node.get("properties", {}):
            assert f"<code>{key}</code>" in scenario, key
    cli = (site / "reference" / "cli" / "index.html").read_text(encoding="utf-8")
    commands = next(a for a in build_parser()._actions if a.dest == "command")
    for name in commands.choices:  # type: ignore[union-attr]
        assert f"critmem {name}</code>" in cli, name
    api = (site / "reference" / "python-api" / "index.html").read_text(encoding="utf-8")
    for name in ("critmem.run", "RunResult", "plot_gantt", "Sweep", "ReservationTree", "JobClient"):
        assert name in api, name


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def served(site: Path) -> Iterator[str]:
    handler = functools.partial(_Quiet, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


def _chromium(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is missing: scripts/setup.sh installs it as root with apt-get (package chromium)")
    with tempfile.TemporaryDirectory() as profile:
        return subprocess.run(
            [str(CHROMIUM), *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args, url],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )


@pytest.mark.parametrize(
    ("page", "title", "image"),
    [
        ("", "critmem", "quickstart-gantt.png"),
        ("getting-started/", "Getting started", "quickstart-memory.png"),
        ("reference/scenario/", "Scenario reference", None),
    ],
)
def test_chromium_renders_the_page_with_its_pictures(served: str, page: str, title: str, image: str | None, tmp_path: Path) -> None:
    url = served + page
    dom = _chromium(url, "--dump-dom", "--virtual-time-budget=5000")
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert "<h1" in dom.stdout and title in dom.stdout
    parsed = _Links()
    parsed.feed(dom.stdout)
    if image is not None:
        assert any(src.endswith(image) for src in parsed.images), parsed.images
    for src in parsed.images:
        with urlopen(urljoin(url, src), timeout=10) as r:
            assert r.status == 200, src
            assert len(r.read()) > 0, src
    shot = tmp_path / "page.png"
    done = _chromium(url, f"--screenshot={shot}", "--window-size=1280,900", "--virtual-time-budget=5000")
    assert done.returncode == 0 and shot.stat().st_size > 10_000, done.stderr[-2000:]


def test_the_quickstart_pictures_are_current(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/images/quickstart-*.png are the quickstart's own plots: regenerate them with
    `critmem run examples/quickstart.toml --out DIR` in the repository and copy gantt.png and
    memory.png."""
    monkeypatch.chdir(ROOT)
    out = tmp_path / "qs"
    o = cli("run", str(QUICKSTART.relative_to(ROOT)), "--out", str(out))
    assert o.code == 0, o.stderr
    for drawn, kept in [("gantt.png", "quickstart-gantt.png"), ("memory.png", "quickstart-memory.png")]:
        a = hashlib.sha256((out / drawn).read_bytes()).hexdigest()
        b = hashlib.sha256((ROOT / "docs" / "images" / kept).read_bytes()).hexdigest()
        assert a == b, f"docs/images/{kept} is stale"
