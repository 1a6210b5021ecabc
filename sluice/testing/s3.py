"""An S3-compatible server for tests: moto's server mode on 127.0.0.1, as a child process.

No S3 server is packaged for the test machine (Debian has no MinIO), so moto's standalone
server (``python -m moto.server``, the ``moto[server]`` extra) stands in: it speaks S3's REST
API, path-style, on a free port, keeping every object in its own memory. pyarrow's
``S3FileSystem`` and pyiceberg's ``PyArrowFileIO`` reach it with ``endpoint_override`` /
``s3.endpoint`` and any access key (moto checks none). It is an emulator: consistency,
conditional writes and multipart limits are moto's, not AWS's.

Lifecycle as every ``ChildProcess``; not thread-safe. ``create_bucket`` and ``filesystem``
open their own clients and are thread-safe.
"""

from __future__ import annotations

import sys
import urllib.request
from pathlib import Path

import pyarrow.fs as pafs

from sluice.testing.net import free_port
from sluice.testing.process import ChildProcess

ACCESS_KEY = "sluice-test"
SECRET_KEY = "sluice-test-secret"
REGION = "us-east-1"


def s3_missing() -> str | None:
    """Why the S3 stand-in cannot be started here, or None if it can."""
    try:
        import moto.server  # noqa: F401
    except ImportError as exc:
        return f"moto's server mode is not installed (pip install 'moto[server]'): {exc}"
    return None


class S3Server(ChildProcess):
    """moto's S3 server on ``127.0.0.1:<port>``; its log in ``base_dir/moto.log``."""

    def __init__(self, base_dir: Path, port: int | None = None) -> None:
        self.base_dir = Path(base_dir).absolute()
        self.port = port or free_port()
        super().__init__(
            self.base_dir / "moto.log",
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
            name="moto S3",
            cwd=self.base_dir,
            env={"AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY},
        )

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(self.endpoint + "/", timeout=1) as answer:
                return bool(answer.status == 200)
        except OSError:
            return False

    def filesystem(self) -> pafs.S3FileSystem:
        """A pyarrow S3 filesystem on this server."""
        return pafs.S3FileSystem(
            access_key=ACCESS_KEY,
            secret_key=SECRET_KEY,
            endpoint_override=self.endpoint,
            scheme="http",
            region=REGION,
            allow_bucket_creation=True,
        )

    def create_bucket(self, name: str) -> str:
        """Create bucket ``name``; returns ``s3://<name>``."""
        self.filesystem().create_dir(name)
        return f"s3://{name}"

    def iceberg_properties(self) -> dict[str, str]:
        """pyiceberg FileIO properties for this server (``iceberg.catalog.<key>``)."""
        return {
            "s3.endpoint": self.endpoint,
            "s3.access-key-id": ACCESS_KEY,
            "s3.secret-access-key": SECRET_KEY,
            "s3.region": REGION,
            "py-io-impl": "pyiceberg.io.pyarrow.PyArrowFileIO",
        }
