"""What comes back from the GPU machine: the return rules, and the check's three files."""
import os
import tarfile

from gpu_check import deliver


def test_violations_name_each_broken_rule(tmp_path):
    assert deliver.violations(tmp_path) == []
    (tmp_path / "ok.json").write_text("{}")
    assert deliver.violations(tmp_path) == []
    (tmp_path / "gpucheck+bs64.train.json").write_text("{}")
    (tmp_path / "a" / "b" / "c").mkdir(parents=True)
    (tmp_path / "a" / "b" / "c" / "deep.txt").write_text("x")
    for i in range(8):
        (tmp_path / f"f{i}").write_text("x")
    big = tmp_path / "big.bin"
    with open(big, "wb") as f:
        f.truncate(deliver.kMaxFileBytes + 1)
    os.symlink("ok.json", tmp_path / "link")
    problems = "\n".join(deliver.violations(tmp_path))
    assert "gpucheck+bs64.train.json: the name has characters" in problems
    assert "a/b/c: a folder more than 2 deep" in problems
    assert "link: not a plain file" in problems
    assert "big.bin" in problems and "over 16777216" in problems
    assert "files, over 8" in problems


def test_deliver_writes_the_report_and_one_archive_within_the_rules(tmp_path):
    work, out = tmp_path / "work", tmp_path / "out"
    (work / "logs").mkdir(parents=True)
    (work / "zeus_log_1").mkdir()
    (work / "zeus_log_1" / "gpucheck+bs64.train.json").write_text("{}")
    for i in range(30):
        (work / "logs" / f"step{i}.log").write_text(f"log {i}\n")
    (work / "gpu-check.json").write_text("{}")
    (work / "gpu-check.txt").write_text("report\n")
    assert deliver.deliver(work, out) == []
    assert sorted(os.listdir(out)) == sorted(deliver.kDelivered)
    with tarfile.open(out / deliver.kArchive) as tar:
        names = tar.getnames()
    assert "gpu-check/zeus_log_1/gpucheck+bs64.train.json" in names
    assert "gpu-check/logs/step29.log" in names


def test_an_archive_over_the_limit_leaves_out_its_largest_files_and_says_so(tmp_path):
    (tmp_path / "small.log").write_text("small\n")
    with open(tmp_path / "huge.bin", "wb") as f:
        f.write(os.urandom(200_000))  # incompressible
    data = deliver.archive_bytes(tmp_path, limit=100_000)
    assert len(data) <= 100_000
    import io
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        names = tar.getnames()
        note = tar.extractfile("gpu-check/OMITTED.txt").read().decode()
    assert "gpu-check/small.log" in names and "gpu-check/huge.bin" not in names
    assert "huge.bin (200000 bytes)" in note


def test_deliver_without_a_report_still_returns_the_archive(tmp_path):
    work, out = tmp_path / "work", tmp_path / "out"
    work.mkdir()
    (work / "steps.json").write_text("{}")
    assert deliver.deliver(work, out) == []
    assert os.listdir(out) == [deliver.kArchive]


def test_clear_removes_only_the_checks_own_files(tmp_path):
    for name in deliver.kDelivered + ("other.txt",):
        (tmp_path / name).write_text("x")
    deliver.clear(tmp_path)
    assert os.listdir(tmp_path) == ["other.txt"]
