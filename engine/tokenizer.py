"""Byte-level BPE tokenizer from GGUF metadata (HF `tokenizers`), chat templates, streaming detokenization."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence

import gguf
from jinja2 import TemplateError
from jinja2.sandbox import ImmutableSandboxedEnvironment
from tokenizers import AddedToken, decoders, models, pre_tokenizers
from tokenizers import Tokenizer as HFTokenizer

from ..errors import GGUFFormatError, RequestError, UnsupportedModelError
from .gguf_loader import field_value, open_gguf
from .types import TextTokenizer

# GGUF token types (llama.cpp's llama_token_type).
_CONTROL, _USER_DEFINED = 3, 4

# Control tokens that end an assistant turn in common chat formats; the model's eos is always a stop too.
_END_OF_TURN = ("<|im_end|>", "<|eot_id|>", "<|endoftext|>", "<|end|>", "<end_of_turn>")

# ChatML without a default system prompt: used when a GGUF carries no template, and by the byte tokenizer.
DEFAULT_CHAT_TEMPLATE = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + "
    "'<|im_end|>' + '\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

_BYTE_SPECIALS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")


def _pre_tokenizer(name: str | None) -> pre_tokenizers.PreTokenizer:
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    if name == "smollm":
        # SmolLM's tokenizer splits every digit on its own before the GPT-2 word split.
        return pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), byte_level])
    if name in (None, "default", "gpt2"):
        return byte_level
    raise UnsupportedModelError(
        f"GGUF pre-tokenizer {name!r} is not supported: this engine knows 'smollm' and 'gpt2'"
    )


def _byte_alphabet() -> list[str]:
    """GPT-2's printable stand-in for each byte value 0..255 (the ByteLevel pre-tokenizer's alphabet)."""
    printable = [
        *range(ord("!"), ord("~") + 1),
        *range(ord("¡"), ord("¬") + 1),
        *range(ord("®"), ord("ÿ") + 1),
    ]
    stand_in: dict[int, str] = {}
    extra = 0
    for byte in range(256):
        if byte in printable:
            stand_in[byte] = chr(byte)
        else:
            stand_in[byte] = chr(256 + extra)
            extra += 1
    return [stand_in[byte] for byte in range(256)]


class Tokenizer:
    """Text <-> token ids for one model, with its chat template and stop tokens."""

    def __init__(
        self,
        hf: HFTokenizer,
        *,
        vocab_size: int,
        bos_token_id: int,
        eos_token_id: int,
        stop_token_ids: Iterable[int],
        chat_template: str,
        add_bos: bool = False,
    ) -> None:
        self._hf = hf
        self._known_ids = hf.get_vocab_size(with_added_tokens=True)
        self.vocab_size = vocab_size
        self.bos_token_id = bos_token_id
        self.eos_token_id = eos_token_id
        self.stop_token_ids = frozenset(stop_token_ids) | {eos_token_id}
        self.add_bos = add_bos
        self.chat_template = chat_template
        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
        env.globals["raise_exception"] = _raise_template_error
        try:
            self._template = env.from_string(chat_template)
        except TemplateError as exc:
            raise GGUFFormatError(f"the model's chat template does not compile ({exc})") from exc
        self.bos_token = hf.id_to_token(bos_token_id) or ""
        self.eos_token = hf.id_to_token(eos_token_id) or ""

    # ------------------------------------------------------------------ construction

    @classmethod
    def from_gguf(cls, path_or_reader: str | os.PathLike[str] | gguf.GGUFReader) -> Tokenizer:
        """Build from `tokenizer.ggml.*` metadata of a GGUF file (a path or an open reader)."""
        reader = path_or_reader if isinstance(path_or_reader, gguf.GGUFReader) else open_gguf(path_or_reader)
        kind = field_value(reader, "tokenizer.ggml.model")
        if kind != "gpt2":
            raise UnsupportedModelError(
                f"GGUF tokenizer model {kind!r} is not supported: this engine runs byte-level BPE ('gpt2')"
            )
        tokens: list[str] = field_value(reader, "tokenizer.ggml.tokens") or []
        merges: list[str] = field_value(reader, "tokenizer.ggml.merges") or []
        token_types: list[int] = field_value(reader, "tokenizer.ggml.token_type") or [1] * len(tokens)
        if not tokens or len(token_types) != len(tokens):
            raise GGUFFormatError(
                "GGUF tokenizer metadata is missing or inconsistent (tokens vs token types)"
            )
        try:
            # A merge without its space fails the unpacking: corrupt, as the BPE model would call it.
            pairs = [(first, second) for first, second in (merge.split(" ", 1) for merge in merges)]
            bpe = models.BPE(vocab={token: i for i, token in enumerate(tokens)}, merges=pairs)
        except Exception as exc:
            raise GGUFFormatError(f"GGUF tokenizer vocabulary or merges are corrupt ({exc})") from exc
        hf = HFTokenizer(bpe)
        hf.pre_tokenizer = _pre_tokenizer(field_value(reader, "tokenizer.ggml.pre"))
        hf.decoder = decoders.ByteLevel()
        hf.add_special_tokens(
            [
                AddedToken(t, special=True, normalized=False)
                for t, kind in zip(tokens, token_types)
                if kind == _CONTROL
            ]
        )
        hf.add_tokens(
            [
                AddedToken(t, special=False, normalized=False)
                for t, kind in zip(tokens, token_types)
                if kind == _USER_DEFINED
            ]
        )
        control = {t: i for i, (t, kind) in enumerate(zip(tokens, token_types)) if kind == _CONTROL}
        eos = int(field_value(reader, "tokenizer.ggml.eos_token_id", control.get("<|endoftext|>", 0)))
        return cls(
            hf,
            vocab_size=len(tokens),
            bos_token_id=int(field_value(reader, "tokenizer.ggml.bos_token_id", eos)),
            eos_token_id=eos,
            stop_token_ids=[control[t] for t in _END_OF_TURN if t in control],
            chat_template=field_value(reader, "tokenizer.chat_template") or DEFAULT_CHAT_TEMPLATE,
            add_bos=bool(field_value(reader, "tokenizer.ggml.add_bos_token", False)),
        )

    @classmethod
    def byte_level(cls, vocab_size: int = 256 + len(_BYTE_SPECIALS)) -> Tokenizer:
        """A model-free tokenizer: 3 ChatML specials (ids 0-2) then one token per byte (ids 3-258).

        Ids from 259 up to `vocab_size` exist only to match a synthetic model's head; they decode to nothing.
        """
        alphabet = _byte_alphabet()
        vocab = {token: i for i, token in enumerate(_BYTE_SPECIALS)}
        vocab.update({char: len(_BYTE_SPECIALS) + byte for byte, char in enumerate(alphabet)})
        hf = HFTokenizer(models.BPE(vocab=vocab, merges=[]))
        hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
        hf.decoder = decoders.ByteLevel()
        hf.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in _BYTE_SPECIALS])
        return cls(
            hf,
            vocab_size=max(vocab_size, len(vocab)),
            bos_token_id=1,
            eos_token_id=2,
            stop_token_ids=[0, 2],
            chat_template=DEFAULT_CHAT_TEMPLATE,
        )

    # ------------------------------------------------------------------ text <-> ids

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        """Token ids of `text`; special-token strings inside it (e.g. <|im_start|>) become their ids."""
        ids = self._hf.encode(text, add_special_tokens=False).ids
        return [self.bos_token_id, *ids] if add_special_tokens and self.add_bos else ids

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        known = self._known_ids
        # A synthetic model can draw ids past the real vocabulary: they carry no text.
        return self._hf.decode([i for i in ids if 0 <= i < known], skip_special_tokens=skip_special_tokens)

    def token_to_id(self, token: str) -> int | None:
        return self._hf.token_to_id(token)

    # ------------------------------------------------------------------ chat

    def apply_chat_template(
        self, messages: Sequence[Mapping[str, object]], add_generation_prompt: bool = True
    ) -> str:
        """Render `messages` ([{"role": ..., "content": ...}], as a client sent them) with the model's Jinja
        chat template."""
        try:
            return self._template.render(
                messages=messages,
                add_generation_prompt=add_generation_prompt,
                bos_token=self.bos_token,
                eos_token=self.eos_token,
            )
        except (TemplateError, TypeError, KeyError) as exc:
            raise RequestError(
                f"chat messages cannot be rendered by the model's template ({exc}); "
                "give a list of {'role': ..., 'content': str} dicts"
            ) from exc

    def encode_chat(self, user_text: str) -> list[int]:
        """Ids of a one-turn chat prompt asking `user_text`, ending with the assistant's turn header."""
        prompt = self.apply_chat_template(
            [{"role": "user", "content": user_text}], add_generation_prompt=True
        )
        return self.encode(prompt, add_special_tokens=True)


def _raise_template_error(message: str) -> None:
    raise TemplateError(message)


class IncrementalDetokenizer:
    """Streams text as tokens arrive, holding back bytes of a character that is not complete yet.

    Each push decodes a short window (tokens already printed since the last complete boundary plus the
    new ones) and emits only the text past what that window printed before; a result ending in U+FFFD
    means a multi-byte character is still incomplete, so nothing is emitted until it completes.
    """

    def __init__(self, tokenizer: TextTokenizer, skip_special_tokens: bool = True) -> None:
        self._tokenizer = tokenizer
        self._skip = skip_special_tokens
        self._ids: list[int] = []
        self._prefix_offset = 0  # start of the decode window
        self._read_offset = 0  # tokens before this are already emitted

    def push(self, token_ids: Sequence[int]) -> str:
        """Add tokens; return only the new, complete text."""
        self._ids.extend(token_ids)
        decode = self._tokenizer.decode
        printed = decode(self._ids[self._prefix_offset : self._read_offset], self._skip)
        text = decode(self._ids[self._prefix_offset :], self._skip)
        if len(text) <= len(printed) or text.endswith("\ufffd"):
            return ""
        self._prefix_offset, self._read_offset = self._read_offset, len(self._ids)
        return text[len(printed) :]

    def flush(self) -> str:
        """Everything still held back (e.g. a truly invalid byte sequence at the end of a stream)."""
        decode = self._tokenizer.decode
        printed = decode(self._ids[self._prefix_offset : self._read_offset], self._skip)
        text = decode(self._ids[self._prefix_offset :], self._skip)
        self._prefix_offset = self._read_offset = len(self._ids)
        return text[len(printed) :]
