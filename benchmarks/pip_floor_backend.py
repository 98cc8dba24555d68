"""A PEP 517 build backend that builds nothing: build_speed.py installs a project with it to
measure what `pip install --no-build-isolation -e` costs on its own, before any build backend
or compiler runs. It writes the smallest valid editable wheel (metadata and a .pth file).
"""

from __future__ import annotations

import base64
import hashlib
import os
import zipfile

NAME, VERSION = "b2c_pip_floor", "1"
DIST = f"{NAME}-{VERSION}.dist-info"
METADATA = f"Metadata-Version: 2.1\nName: b2c-pip-floor\nVersion: {VERSION}\nRequires-Dist: torch\n"
WHEEL = "Wheel-Version: 1.0\nGenerator: b2c-pip-floor\nRoot-Is-Purelib: true\nTag: py3-none-any\n"


def get_requires_for_build_editable(config_settings: object = None) -> list[str]:
    return []


def prepare_metadata_for_build_editable(directory: str, config_settings: object = None) -> str:
    os.makedirs(os.path.join(directory, DIST), exist_ok=True)
    with open(os.path.join(directory, DIST, "METADATA"), "w") as out:
        out.write(METADATA)
    return DIST


def build_editable(
    directory: str, config_settings: object = None, metadata_directory: object = None
) -> str:
    files = {
        f"{DIST}/METADATA": METADATA,
        f"{DIST}/WHEEL": WHEEL,
        f"_{NAME}.pth": os.getcwd() + "\n",
    }
    record = []
    name = f"{NAME}-{VERSION}-py3-none-any.whl"
    with zipfile.ZipFile(os.path.join(directory, name), "w") as wheel:
        for path, text in files.items():
            wheel.writestr(path, text)
            digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest())
            record.append(f"{path},sha256={digest.rstrip(b'=').decode()},{len(text)}")
        record.append(f"{DIST}/RECORD,,")
        wheel.writestr(f"{DIST}/RECORD", "\n".join(record) + "\n")
    return name
