"""Prompt text: seeded synthetic text from a built-in word list, and prompt files (one prompt per line)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

# Common English words: most are one BPE token with their leading space, so a text of N words is about
# N tokens; the session encodes the text and trims it to exactly the request's prompt_tokens.
WORDS: tuple[str, ...] = tuple(  # one string split, to read as prose rather than 259 list items
    """
    the of and to in is was for that on with as by at from his her it be this are have not had which
    one you were all they she there an their been has more when who will would if out so said what
    up its about into than them can only other new some time could these two may then do first any
    my now such like our over man me even most made after also did many before must through back
    years where much your way well down should because each just those people how too little state
    good very make world still own see men work long get here between both life being under never
    day same another know while last might us great old year off come since against go came right
    used take three house water light place story river city music table window garden morning
    evening paper market question answer reason number system program problem service report company
    family school friend student teacher doctor road train ship bridge mountain forest field island
    village street station letter picture history science language country money price plan idea
    point group level power order change result method model engine memory request token simple
    small large early late quick slow quiet loud warm cold bright dark fresh clean careful happy
    ready open close write read think speak listen build carry follow bring share learn teach travel
    explain describe compare measure improve finish begin start stop keep move turn hold leave meet
    send pay buy sell grow
    """.split()
)


def words_for_tokens(num_tokens: int) -> int:
    """How many words to generate for a prompt of `num_tokens` tokens: about one per token, plus margin."""
    return num_tokens + num_tokens // 8 + 8


def synthetic_text(num_words: int, rng: np.random.Generator) -> str:
    """`num_words` words drawn from WORDS, as sentences of 8-16 words (seeded by `rng`)."""
    picks = rng.integers(0, len(WORDS), size=num_words)
    sentence_lengths = rng.integers(8, 17, size=num_words // 8 + 1)
    sentences = []
    start = 0
    for length in sentence_lengths:
        chunk = [WORDS[i] for i in picks[start : start + length]]
        if not chunk:
            break
        sentences.append(chunk[0].capitalize() + "".join(" " + word for word in chunk[1:]) + ".")
        start += length
    return " ".join(sentences)


def synthetic_prompt(num_tokens: int, seed: int) -> str:
    """Text generous enough to encode to at least `num_tokens` tokens, the same for the same seed."""
    return synthetic_text(words_for_tokens(num_tokens), np.random.default_rng([seed, num_tokens]))


def read_prompt_file(path: Path) -> list[str]:
    """The prompts of a text file: one per line; blank lines and lines starting with '#' are skipped."""
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    prompts = [line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")]
    if not prompts:
        raise ValueError("the file holds no prompt (one per line; '#' lines and blank lines are skipped)")
    return prompts
