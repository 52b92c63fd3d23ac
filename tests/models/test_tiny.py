"""The embedded tiny model: real Cosmos3 classes and structure, deterministic bytes, built offline."""

import hashlib
import json

from cosmos_helpers.models.tiny import TRANSFORMER_CONFIG, build_tokenizer, tiny_model_path


def folder_digest(folder):
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(folder)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def test_same_seed_builds_identical_files_and_another_seed_differs(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    a = tiny_model_path(0, tmp_path / "a")
    b = tiny_model_path(0, tmp_path / "b")
    c = tiny_model_path(1, tmp_path / "c")
    assert folder_digest(a) == folder_digest(b)
    assert folder_digest(a) != folder_digest(c)
    assert tiny_model_path(0, tmp_path / "a") == a  # second call reuses the cache
    assert not [p for p in (tmp_path / "a").iterdir() if p.name.startswith(".")]  # no staging left behind


def test_it_has_the_cosmos3_structure(tmp_path):
    folder = tiny_model_path(0, tmp_path)
    index = json.loads((folder / "model_index.json").read_text())
    assert index["_class_name"] == "Cosmos3OmniPipeline"
    assert index["text_tokenizer"] == ["transformers", "Qwen2Tokenizer"]
    assert index["enable_safety_checker"] is False
    vae = json.loads((folder / "vae/config.json").read_text())
    assert (vae["z_dim"], vae["patch_size"]) == (48, 2)
    assert (vae["scale_factor_spatial"], vae["scale_factor_temporal"]) == (16, 4)
    transformer = json.loads((folder / "transformer/config.json").read_text())
    assert transformer["sound_gen"] and transformer["sound_dim"] == 8
    assert sum(transformer["rope_axes_dim"]) == transformer["head_dim"] // 2
    assert transformer["patch_latent_dim"] == transformer["latent_patch_size"] ** 2 * vae["z_dim"]
    sound = json.loads((folder / "sound_tokenizer/config.json").read_text())
    assert sound["sampling_rate"] == 48000 and sound["vocoder_input_dim"] == TRANSFORMER_CONFIG["sound_dim"]
    hop = 1
    for stride in sound["dec_strides"]:
        hop *= stride
    assert hop == 48000 / transformer["sound_latent_fps"]
    scheduler = json.loads((folder / "scheduler/scheduler_config.json").read_text())
    assert scheduler["use_flow_sigmas"] and not scheduler["use_karras_sigmas"]


def test_tokenizer_has_qwen_specials_in_order_and_the_chat_layout():
    tokenizer = build_tokenizer()
    assert len(tokenizer) == 264 == TRANSFORMER_CONFIG["vocab_size"]
    assert tokenizer.convert_tokens_to_ids("<|vision_start|>") == 259
    assert tokenizer.eos_token_id == 258 and tokenizer.pad_token_id == 256
    text = tokenizer.apply_chat_template([{"role": "system", "content": "S"}, {"role": "user", "content": "hé"}],
                                         tokenize=False, add_generation_prompt=True)
    assert text == "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nhé<|im_end|>\n<|im_start|>assistant\n"
    ids = tokenizer("hé")["input_ids"]
    assert len(ids) == 3  # one token per UTF-8 byte
