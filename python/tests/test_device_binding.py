"""The CUDA device a rank binds follows the C++ runtime's rule (zeus/cluster/device_binding.h),
checked without a GPU: torch.cuda and the process group are stood in for."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist

import zeus_cpp
from zeus_cpp import _core
from zeus_cpp import distributed as zdist


@pytest.fixture
def fake_cuda(monkeypatch, job_env):
    """CUDA with `count` devices; records set_device; a process group that only records."""
    state = {"count": 1, "set": [], "init": []}
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: state["count"])
    monkeypatch.setattr(torch.cuda, "set_device", lambda i: state["set"].append(i))
    monkeypatch.setattr(dist, "is_initialized", lambda: False)
    monkeypatch.setattr(dist, "init_process_group", lambda *a, **k: state["init"].append((a, k)))
    monkeypatch.setattr(dist, "get_rank", lambda: 1)
    monkeypatch.setattr(dist, "get_world_size", lambda: 2)
    monkeypatch.setattr(dist, "get_backend", lambda: "gloo")
    monkeypatch.setattr(zdist, "_info", None)
    for name, value in (("RANK", "1"), ("LOCAL_RANK", "1"), ("WORLD_SIZE", "2"),
                        ("LOCAL_WORLD_SIZE", "2"), ("MASTER_ADDR", "127.0.0.1"),
                        ("MASTER_PORT", "29999")):
        monkeypatch.setenv(name, value)
    return state


def test_a_worker_given_one_device_of_its_own_binds_cuda_0(fake_cuda, monkeypatch) -> None:
    # zeus run --devices 2,3: local rank 1 sees only device 3, as its cuda:0.
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    info = zdist.init_torch(backend="gloo")
    assert info.device == torch.device("cuda", 0)
    assert fake_cuda["set"] == [0]


def test_on_a_shared_node_the_local_rank_picks_its_device(fake_cuda, monkeypatch) -> None:
    fake_cuda["count"] = 2
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert zdist.init_torch(backend="gloo").device == torch.device("cuda", 1)


def test_a_local_rank_without_a_device_is_the_runtimes_error(fake_cuda, monkeypatch) -> None:
    fake_cuda["count"] = 1
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")  # two entries, one device seen
    with pytest.raises(zeus_cpp.ConfigError, match=r"local rank 1 of 2\): needs CUDA device 1 but "
                                                    r"1 device\(s\) are visible \(CUDA_VISIBLE_DEVICES='0,1'\)"):
        zdist.init_torch(backend="gloo")
    assert fake_cuda["set"] == [] and fake_cuda["init"] == []


def test_the_rule_itself() -> None:
    env = _core.detect_env([])
    assert _core.cuda_device_index(env, 1, "7") == 0
    assert _core.cuda_device_index(env, 4, None) == env.local_rank


def test_rocm_gives_a_worker_its_own_device_too(fake_cuda, monkeypatch) -> None:
    # ROCm PyTorch calls AMD GPUs cuda:N; ROCR_VISIBLE_DEVICES=2,3 then HIP_VISIBLE_DEVICES=1
    # leave this worker one device, HIP GPU 3, which it binds as its cuda:0.
    fake_cuda["count"] = 1
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setenv("ROCR_VISIBLE_DEVICES", "2,3")
    monkeypatch.setenv("HIP_VISIBLE_DEVICES", "1")
    assert _core.runtime_visible_devices() == "1"
    assert zdist.init_torch(backend="gloo").device == torch.device("cuda", 0)
    assert fake_cuda["set"] == [0]


def test_rocms_variables_name_themselves_in_errors(fake_cuda, monkeypatch) -> None:
    fake_cuda["count"] = 1
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setenv("HIP_VISIBLE_DEVICES", "0,1")
    with pytest.raises(zeus_cpp.ConfigError, match=r"HIP_VISIBLE_DEVICES='0,1'"):
        zdist.init_torch(backend="gloo")
