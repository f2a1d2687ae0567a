"""Data that ships as Debian packages (WordNet, Jane Austen's novels): fetched with
``apt-get download`` (no root needed) and unpacked into the user cache, never installed."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

from samark.errors import SamarkError
from samark.models import cache_dir


def unpack_debian_packages(packages: tuple[str, ...], name: str) -> Path:
    """``apt-get download`` each package and unpack all into ``cache_dir()/name`` (a
    filesystem root: files keep their ``usr/...`` paths); returns that root."""
    if shutil.which("apt-get") is None or shutil.which("dpkg-deb") is None:
        raise SamarkError(
            f"{name} needs Debian's {', '.join(packages)} (apt-get and dpkg-deb not found; "
            f"apt-get install {' '.join(packages)})"
        )
    target = cache_dir() / name
    with tempfile.TemporaryDirectory() as tmp:
        done = subprocess.run(
            ["apt-get", "download", *packages], cwd=tmp, capture_output=True, text=True
        )
        debs = sorted(Path(tmp).glob("*.deb"))
        if done.returncode != 0 or len(debs) != len(packages):
            raise SamarkError(f"apt-get download {' '.join(packages)} failed: {done.stderr[-500:]}")
        staging = Path(tmp) / "root"
        for deb in debs:
            subprocess.run(["dpkg-deb", "-x", str(deb), str(staging)], check=True)
        if target.exists():
            shutil.rmtree(target)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(staging), str(target))
    return target


def package_root(package: str, relative: str, cache_name: str) -> Path:
    """The filesystem root under which ``relative`` exists: ``/`` where ``package`` is
    installed, else ``cache_dir()/cache_name``, unpacking the package there on first use."""
    for root in (Path("/"), cache_dir() / cache_name):
        if (root / relative).exists():
            return root
    return unpack_debian_packages((package,), cache_name)
