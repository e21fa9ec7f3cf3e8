"""Tokenizer: llama.cpp-identical SmolLM2 ids, round trips, chat templates, streaming detokenization."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infer_prof.engine.tokenizer import IncrementalDetokenizer, Tokenizer
from infer_prof.errors import RequestError, UnsupportedModelError

# Ids llama.cpp (llama-tokenize on SmolLM2-135M-Instruct) gives the chat-templated question.
LLAMA_CPP_FRANCE_IDS = [
    1,
    9690,
    198,
    2683,
    359,
    253,
    5356,
    5646,
    11173,
    3365,
    3511,
    308,
    34519,
    28,
    7018,
    411,
    407,
    19712,
    8182,
    2,
    198,
    1,
    4093,
    198,
    1780,
    314,
    260,
    3575,
    282,
    4649,
    47,
    2,
    198,
    1,
    520,
    9531,
    198,
]

TEXTS = {
    "ascii": "Hello, world! The quick brown fox jumps over the lazy dog 1234567890.",
    "cjk": "我爱北京天安门。日本語のテキスト、한국어 문장도 있습니다.",
    "emoji_zwj": "family 👩‍👩‍👧‍👦, flags 🇫🇷🇯🇵, skin 👍🏽, rainbow 🏳️‍🌈 done",
    "code": "def f(x: int) -> int:\n\treturn {'a': [x ** 2, 0x1F]}  # comment\r\n",
    "whitespace": "  leading\n\n\n  trailing   \t ",
}

STREAMS = {
    "cjk": "你好，世界！这是一个流式输出的测试：汉字、かな、カナ、한글。",
    "emoji": "🙂🙃 👨‍👩‍👧 🧑🏿‍🚀 🇺🇳 ✨💯 the end",
}


@pytest.fixture(scope="module")
def byte_tokenizer() -> Tokenizer:
    return Tokenizer.byte_level(49152)


@pytest.fixture(params=["byte", pytest.param("smollm2", marks=pytest.mark.slow)])
def tokenizer(request, byte_tokenizer):  # type: ignore[no-untyped-def]
    return byte_tokenizer if request.param == "byte" else request.getfixturevalue("smollm2").tokenizer


@pytest.mark.slow
def test_chat_prompt_ids_equal_llama_cpp(smollm2) -> None:  # type: ignore[no-untyped-def]
    tok = smollm2.tokenizer
    prompt = tok.apply_chat_template([{"role": "user", "content": "What is the capital of France?"}])
    assert tok.encode(prompt) == LLAMA_CPP_FRANCE_IDS
    assert tok.encode_chat("What is the capital of France?") == LLAMA_CPP_FRANCE_IDS


@pytest.mark.slow
def test_smollm2_vocabulary_facts(smollm2) -> None:  # type: ignore[no-untyped-def]
    tok = smollm2.tokenizer
    assert tok.vocab_size == 49152
    assert (tok.bos_token_id, tok.eos_token_id) == (1, 2)
    assert tok.token_to_id("<|im_end|>") == 2
    assert tok.stop_token_ids == frozenset({0, 2})  # <|im_end|> (= eos) and <|endoftext|>
    # The smollm pre-tokenizer splits digits one by one.
    assert [tok.decode([i]) for i in tok.encode("2024")] == ["2", "0", "2", "4"]
    # Special-token strings inside text become their ids; decoding skips them by default.
    ids = tok.encode("<|im_start|>user\nhi<|im_end|>")
    assert ids[0] == 1 and ids[-1] == 2
    assert tok.decode(ids) == "user\nhi"


@pytest.mark.slow
def test_smollm2_template_adds_its_default_system_prompt(smollm2) -> None:  # type: ignore[no-untyped-def]
    tok = smollm2.tokenizer
    plain = tok.apply_chat_template([{"role": "user", "content": "hi"}])
    assert plain.startswith("<|im_start|>system\nYou are a helpful AI assistant named SmolLM")
    assert plain.endswith("<|im_start|>assistant\n")
    own = tok.apply_chat_template(
        [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}],
        add_generation_prompt=False,
    )
    assert own == "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n"


@pytest.mark.parametrize("name", list(TEXTS))
def test_round_trip(tokenizer: Tokenizer, name: str) -> None:
    text = TEXTS[name]
    ids = tokenizer.encode(text)
    assert all(0 <= i < tokenizer.vocab_size for i in ids)
    assert tokenizer.decode(ids) == text


def test_special_tokens_round_trip(tokenizer: Tokenizer) -> None:
    text = "<|im_start|>assistant\n答え 42<|im_end|>"
    ids = tokenizer.encode(text)
    assert ids.count(tokenizer.token_to_id("<|im_start|>")) == 1
    assert tokenizer.decode(ids, skip_special_tokens=False) == text
    assert tokenizer.decode(ids) == "assistant\n答え 42"


@pytest.mark.parametrize("name", list(STREAMS))
def test_streaming_one_token_at_a_time_equals_decode(tokenizer: Tokenizer, name: str) -> None:
    ids = tokenizer.encode(STREAMS[name])
    detok = IncrementalDetokenizer(tokenizer)
    pieces = [detok.push([i]) for i in ids]
    assert "".join(pieces) + detok.flush() == tokenizer.decode(ids)
    assert not any("\ufffd" in piece for piece in pieces)  # never a broken character on the wire
    assert sum(1 for p in pieces if p) > 5  # it really streams


def test_streaming_holds_back_an_incomplete_character(byte_tokenizer: Tokenizer) -> None:
    ids = byte_tokenizer.encode("é!")  # byte tokens: 0xC3, 0xA9, '!'
    assert len(ids) == 3
    detok = IncrementalDetokenizer(byte_tokenizer)
    assert detok.push(ids[:1]) == ""
    assert detok.push(ids[1:2]) == "é"
    assert detok.push(ids[2:]) == "!"


def test_streaming_special_tokens(byte_tokenizer: Tokenizer) -> None:
    ids = byte_tokenizer.encode("a<|im_end|>b")
    shown = IncrementalDetokenizer(byte_tokenizer, skip_special_tokens=False)
    hidden = IncrementalDetokenizer(byte_tokenizer)
    assert "".join(shown.push([i]) for i in ids) == "a<|im_end|>b"
    assert "".join(hidden.push([i]) for i in ids) == "ab"


def test_flush_releases_a_truly_invalid_tail(byte_tokenizer: Tokenizer) -> None:
    lone_lead_byte = byte_tokenizer.encode("é")[:1]
    detok = IncrementalDetokenizer(byte_tokenizer)
    assert detok.push(byte_tokenizer.encode("ok") + lone_lead_byte) == ""
    assert detok.flush() == "ok\ufffd"


@settings(max_examples=60, deadline=None)
@given(text=st.text(max_size=40), chunk=st.integers(min_value=1, max_value=4))
def test_byte_tokenizer_round_trips_and_streams_any_text(text: str, chunk: int) -> None:
    tok = Tokenizer.byte_level(512)
    ids = tok.encode(text)
    assert tok.decode(ids, skip_special_tokens=False) == text
    detok = IncrementalDetokenizer(tok, skip_special_tokens=False)
    streamed = "".join(detok.push(ids[i : i + chunk]) for i in range(0, len(ids), chunk)) + detok.flush()
    assert streamed == text


def test_byte_tokenizer_shape(byte_tokenizer: Tokenizer) -> None:
    assert byte_tokenizer.vocab_size == 49152
    assert byte_tokenizer.encode("A") == [3 + ord("A")]
    assert byte_tokenizer.stop_token_ids == frozenset({0, 2})
    # A synthetic model may draw ids past the byte vocabulary: they decode to nothing instead of failing.
    assert byte_tokenizer.decode([3 + ord("A"), 40000, 49151]) == "A"
    prompt = byte_tokenizer.encode_chat("hi")
    assert (
        byte_tokenizer.decode(prompt, skip_special_tokens=False)
        == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    )


def test_bad_chat_messages_raise_a_request_error(byte_tokenizer: Tokenizer) -> None:
    with pytest.raises(RequestError, match="role"):
        byte_tokenizer.apply_chat_template([{"content": "no role"}])  # type: ignore[list-item]


def test_unsupported_tokenizer_kinds(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import gguf

    path = tmp_path / "spm.gguf"
    writer = gguf.GGUFWriter(path, "llama")
    writer.add_tokenizer_model("llama")
    writer.add_token_list(["<unk>", "a"])
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    with pytest.raises(UnsupportedModelError, match="'llama'"):
        Tokenizer.from_gguf(path)


def test_tiny_gguf_tokenizer_uses_its_merges(tiny_gguf) -> None:  # type: ignore[no-untyped-def]
    tok = Tokenizer.from_gguf(tiny_gguf())
    assert tok.encode("hell") == [tok.token_to_id("hell")]
    assert tok.decode(tok.encode("hello 123")) == "hello 123"
