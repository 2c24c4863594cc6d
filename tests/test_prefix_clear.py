"""The top level takes its pip install out of the host prefix once staged: conda-build copies what
the top level adds to the host prefix into every output's env, and the megabuild Python's pytorch
output, whose ``pip install`` writes the same paths, would then package none of them (what the real
conda-build 26.7.1 built: a pytorch of 9 files)."""

from __future__ import annotations

from pathlib import Path

from megabuild.pipeline.prefix_clear import remove_installed


def _installed(prefix: Path) -> Path:
    sp = prefix / "lib" / "python3.12" / "site-packages"
    files = ["torch/__init__.py", "torch/_C.cpython-312-x86_64-linux-gnu.so", "torch/lib/libtorch_python.so",
             "functorch/__init__.py", "torch-2.14.1.dist-info/METADATA", "../../../bin/torchrun"]  # fmt: skip
    for rel in files:
        (sp / rel).parent.mkdir(parents=True, exist_ok=True)
        (sp / rel).write_text("x")
    (sp / "torch" / "__pycache__").mkdir()
    (sp / "torch" / "__pycache__" / "__init__.cpython-312.pyc").write_text("x")
    record = "".join(f"{rel},sha256=x,1\n" for rel in files) + "torch-2.14.1.dist-info/RECORD,,\n"
    (sp / "torch-2.14.1.dist-info" / "RECORD").write_text(record)
    (sp / "numpy").mkdir()
    (sp / "numpy" / "__init__.py").write_text("another package's")
    return sp


def test_the_top_levels_install_leaves_the_prefix(tmp_path: Path) -> None:
    sp = _installed(tmp_path)
    line = remove_installed(sp, tmp_path)
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if not p.is_dir()) == [
        "lib/python3.12/site-packages/numpy/__init__.py"
    ]
    assert "removed 7 files" in line
