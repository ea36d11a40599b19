"""The knobs every torch job has without a key (brim._job_wide), on a stand-in torch: no GPU needed."""

from typing import Any, Dict, List, Tuple

from brim import _job_wide, _state


class FakeTorch:
    def __init__(self) -> None:
        self.threads = 4
        self.matmul = "highest"

    def get_num_threads(self) -> int:
        return self.threads

    def set_num_threads(self, n: int) -> None:
        self.threads = n

    def get_float32_matmul_precision(self) -> str:
        return self.matmul

    def set_float32_matmul_precision(self, value: str) -> None:
        self.matmul = value


class Param:
    def __init__(self, is_cuda: bool) -> None:
        self.is_cuda = is_cuda


class Optimizer:
    def __init__(self, is_cuda: bool) -> None:
        self.param_groups: List[Dict[str, Any]] = [{"params": [Param(is_cuda)]}]


def _reads(monkeypatch: Any, knobs: str, optimizers: List[Optimizer]) -> Tuple[FakeTorch, List[Tuple[str, Any, Any, str]]]:
    said: List[Tuple[str, Any, Any, str]] = []
    monkeypatch.setenv("BRIM_KNOBS", knobs)
    monkeypatch.setattr(_state, "note_knob", lambda *args: said.append(args))
    monkeypatch.setattr(_job_wide, "_seen", {})
    torch = FakeTorch()
    _job_wide.set_at_import(torch)
    for optimizer in optimizers:
        _job_wide.report(optimizer)
    return torch, said


def test_a_gpu_optimizer_says_the_matmul_precision_a_cpu_one_does_not(monkeypatch: Any) -> None:
    torch, said = _reads(monkeypatch, '{"matmul_precision": "high"}', [Optimizer(False)])
    assert torch.matmul == "high"
    assert said == [("cpu_threads", 4, 4, "default")]
    torch, said = _reads(monkeypatch, '{"matmul_precision": "high"}', [Optimizer(False), Optimizer(True), Optimizer(True)])
    assert said == [("cpu_threads", 4, 4, "default"), ("matmul_precision", "high", "highest", "knobs")]


def test_the_job_s_own_setting_after_import_is_its_configuration(monkeypatch: Any) -> None:
    said: List[Tuple[str, Any, Any, str]] = []
    monkeypatch.setenv("BRIM_KNOBS", '{"cpu_threads": 2}')
    monkeypatch.setattr(_state, "note_knob", lambda *args: said.append(args))
    monkeypatch.setattr(_job_wide, "_seen", {})
    torch = FakeTorch()
    _job_wide.set_at_import(torch)
    assert torch.threads == 2
    torch.set_float32_matmul_precision("medium")
    _job_wide.report(Optimizer(True))
    assert said == [("cpu_threads", 2, 4, "knobs"), ("matmul_precision", "medium", "medium", "code")]
