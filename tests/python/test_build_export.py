import json

from tilelab.spec import build_export


def test_export_writes_cmake_and_json(root, tmp_path):
    cmake, js = tmp_path / "parts.cmake", tmp_path / "a.json"
    rc = build_export.main([str(root / "assignment.yaml"), "--cmake", str(cmake), "--json", str(js)])
    assert rc == 0
    text = cmake.read_text()
    assert "set(TILELAB_PARTS naive tiled boundary rectangular dynamic_smem challenge)" in text
    assert "set(TILELAB_PART_dynamic_smem_SIGNATURE rectangular_props)" in text
    # The challenge's starter is a working kernel; the others stop at a TODO.
    assert "set(TILELAB_PART_challenge_STARTER_EXPECT pass)" in text
    assert "set(TILELAB_PART_tiled_STARTER_EXPECT not_implemented)" in text
    # A part scored against cuBLAS makes the build add the cuBLAS baseline.
    assert "set(TILELAB_CUBLAS_BASELINE ON)" in text
    doc = json.loads(js.read_text())
    tiled = [p for p in doc["parts"] if p["id"] == "tiled"][0]
    assert tiled["cases"]["public"][0] == {"name": "w32", "j": 32, "k": 32, "l": 32, "distribution": "uniform"}
    assert tiled["tolerance"] == {"sqrt_k_factor": 16.0}


def test_export_leaves_unchanged_files_alone(root, tmp_path):
    cmake, js = tmp_path / "parts.cmake", tmp_path / "a.json"
    args = [str(root / "assignment.yaml"), "--cmake", str(cmake), "--json", str(js)]
    build_export.main(args)
    before = cmake.stat().st_mtime_ns
    build_export.main(args)
    assert cmake.stat().st_mtime_ns == before


def test_export_reports_a_broken_assignment(tmp_path, capsys):
    bad = tmp_path / "assignment.yaml"
    bad.write_text("name: x\n")
    rc = build_export.main([str(bad), "--cmake", str(tmp_path / "c"), "--json", str(tmp_path / "j")])
    assert rc == 1
    assert "missing required key 'title'" in capsys.readouterr().err
