"""benchmarks/device_corpus.py: how the cores are shared between the builds it runs."""

from __future__ import annotations

from tests.conftest import REPO, load_script

SCRIPT = REPO / "benchmarks" / "device_corpus.py"


def test_a_project_built_alone_gets_every_core() -> None:
    device_corpus = load_script(SCRIPT)
    # sgl-flash-attn3's slice on 16 cores with the default --jobs 4 (G10 ran it 4 compiles wide).
    assert device_corpus.compile_jobs(16, 4, 1) == 16
    assert device_corpus.compile_jobs(16, 4, 2) == 8
    # G1: 22 projects, five at once.
    assert device_corpus.compile_jobs(16, 5, 22) == 3
    # More builds at once than cores: each still compiles.
    assert device_corpus.compile_jobs(4, 5, 5) == 1
