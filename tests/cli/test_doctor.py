"""`infer-prof doctor` tells the truth about the C twins and the default model."""

from __future__ import annotations

from infer_prof.cli import doctor


def _by_name(rows):  # type: ignore[no-untyped-def]
    return {name: (status, detail) for name, status, detail in rows}


def test_loaded_twins_are_reported_built_with_their_library(monkeypatch):
    from infer_prof.native_paths.loader import COMPONENT_SYMBOLS

    status = {
        "built": True,
        "path": "/x/_native.abi3.so",
        "reason": "",
        **dict.fromkeys(COMPONENT_SYMBOLS, True),
    }
    monkeypatch.setattr("infer_prof.native_paths.loader.available", lambda: status)
    rows = _by_name(doctor.native_rows())
    assert rows["native library"] == ("built", "/x/_native.abi3.so")
    assert set(COMPONENT_SYMBOLS) >= {"sampler", "kv_alloc", "scheduler", "prepare", "core"}
    assert {rows[f"native {name}"][0] for name in COMPONENT_SYMBOLS} == {"built"}
    # The bookkeeping keys of available() are not components: no "native path" / "native reason" rows.
    assert not {"native path", "native reason", "native built"} & set(rows)
    assert all(state != "missing" for state, _ in rows.values())


def test_a_library_without_one_twin_names_it(monkeypatch):
    status = {
        "built": True,
        "path": "/x/lib.so",
        "reason": "the library at /x/lib.so lacks sampler; rebuild it",
        "sampler": False,
        "kv_alloc": True,
        "scheduler": True,
    }
    monkeypatch.setattr("infer_prof.native_paths.loader.available", lambda: status)
    rows = _by_name(doctor.native_rows())
    assert rows["native sampler"][0] == "missing" and "lacks sampler" in rows["native sampler"][1]
    assert rows["native kv_alloc"][0] == "built"


def test_an_unbuilt_library_says_why_once(monkeypatch):
    status = {
        "built": False,
        "path": "",
        "reason": "native_paths._native is not built",
        "sampler": False,
        "kv_alloc": False,
        "scheduler": False,
    }
    monkeypatch.setattr("infer_prof.native_paths.loader.available", lambda: status)
    rows = _by_name(doctor.native_rows())
    assert rows["native library"] == (
        "missing",
        "native_paths._native is not built; the Python twins run instead",
    )
    assert rows["native scheduler"] == ("missing", "the library is not built; the Python twin runs instead")


def test_the_real_installation_reports_its_twins_and_model():
    from infer_prof.native_paths.loader import available

    rows = _by_name(doctor.doctor_rows())
    if available()["built"]:
        assert rows["native library"][0] == "built"
    status, detail = rows["default model"]
    assert status in ("ok", "not local"), rows["default model"]  # never "unknown"


def test_default_model_row_follows_the_lookup(monkeypatch, tmp_path):
    path = tmp_path / "SmolLM2.gguf"
    monkeypatch.setattr("infer_prof.engine.catalog.local_gguf", lambda: path)
    assert doctor.default_model_status() == ("ok", str(path))
    monkeypatch.setattr("infer_prof.engine.catalog.local_gguf", lambda: None)
    status, detail = doctor.default_model_status()
    assert status == "not local" and "downloaded with pip on first use" in detail


def test_torch_is_reported_from_its_metadata_unless_asked_to_import_it():
    from importlib import metadata

    name, status, detail = doctor.torch_row(with_torch=False)
    assert (name, status) == ("torch", "ok")
    assert (
        detail.startswith(metadata.version("torch"))
        and "not imported" in detail
        and "doctor --torch" in detail
    )
    name, status, detail = doctor.torch_row(with_torch=True)
    assert "threads" in detail and "import took" in detail


def test_py_spy_next_to_this_python_is_found_as_the_sampler_finds_it(monkeypatch, tmp_path):
    (tmp_path / "py-spy").write_text("")
    monkeypatch.setattr("shutil.which", lambda name: None)
    monkeypatch.setattr("sys.executable", str(tmp_path / "python"))
    monkeypatch.setattr(doctor, "_realtime_status", lambda: ("no", "skipped here"))
    assert _by_name(doctor.doctor_rows())["py-spy"] == ("ok", str(tmp_path / "py-spy"))
    (tmp_path / "py-spy").unlink()
    assert _by_name(doctor.doctor_rows())["py-spy"][0] == "missing"
