"""The Cosmos text blocklist, matched here with the framework guardrail's own rules, before a request is sent.

The framework's ``Blocklist`` guardrail (``auxiliary/guardrail/blocklist/blocklist.py``) reads the ``custom/``,
``exact_match/`` and ``whitelist/`` lists of the ``blocklist`` folder of ``nvidia/Cosmos-Guardrail1``, downloaded at
run time; none ships here (:meth:`Blocklist.known_subset` is a public sample, NVIDIA/TensorRT-LLM#17523). After
``to_ascii``, a prompt is blocked by (1) the censor pass: after NFKC, accent removal and invisibles to spaces, a
better-profanity word or run of words equals a non-whitelisted ``custom`` entry, look-alikes included (``bl33ding``);
(2) the same after each token is lemmatised as a noun (``corpses``); (3) an ``exact_match`` entry as whole words, or
for entries of 6+ characters a same-length run of words within 0.4 characters of it.

The lemma pass applies WordNet's noun suffix rules without its dictionary (nltk is not a dependency), so it flags a
plural WordNet would not know. Quotes are word characters in pass 1 only: ``"bleeding"`` inside JSON is caught.
"""

from __future__ import annotations

import functools
import os
import re
import unicodedata
from dataclasses import dataclass
from difflib import SequenceMatcher
from pathlib import Path
from string import ascii_letters, digits
from typing import Iterable

from ..errors import ValidationError
from ..protocol.prompting import FACTS

_GUARD = FACTS["guardrail"]
_PROFANITY = FACTS["better_profanity"]
CHECKPOINT = _GUARD["checkpoint"]  # {"repository": "nvidia/Cosmos-Guardrail1", "revision": ...}
_FOLDERS = _GUARD["list_folders"]  # Blocklist attribute -> folder
PARTIAL_MIN_CHARS = _GUARD["partial_match_defaults"]["guardrail_partial_match_min_chars"]
PARTIAL_LETTERS = _GUARD["partial_match_defaults"]["guardrail_partial_match_letter_count"]
_INVISIBLE = re.compile(_GUARD["invisible_chars"])
_LOOKALIKE: dict[str, tuple[str, ...]] = {k: tuple(v) for k, v in _PROFANITY["chars_mapping"].items()}
assert all(len(c) == 1 for variants in _LOOKALIKE.values() for c in variants)  # one character for one
_WORD_CHARS = frozenset(ascii_letters + digits + "".join(_PROFANITY["extra_word_characters"]))
_WORD = re.compile("[" + re.escape("".join(sorted(_WORD_CHARS))) + "]+")  # a better-profanity word
# nltk corpus/reader/wordnet.py MORPHOLOGICAL_SUBSTITUTIONS[NOUN], what lemmatize(token) (pos "n") applies
_NOUN_RULES = (("s", ""), ("ses", "s"), ("ves", "f"), ("xes", "x"), ("zes", "z"), ("ches", "ch"), ("shes", "sh"),
               ("men", "man"), ("ies", "y"))
# Entries NVIDIA reported blocked, with the rewording it shipped (NVIDIA/TensorRT-LLM#17523, merged 2026-08)
KNOWN_BLOCKED: dict[str, str] = {"bleeding": "smearing", "lifeless": "inert"}
KNOWN_SOURCE = "https://github.com/NVIDIA/TensorRT-LLM/pull/17523"


@dataclass(frozen=True)
class Blocklist:
    """The three lists of the guardrail's ``blocklist`` folder, and where they came from."""

    custom: tuple[str, ...]
    exact_match: tuple[str, ...] = ()
    whitelist: tuple[str, ...] = ()
    source: str = "given words"
    complete: bool = False  # the real lists (a checkpoint folder), not a sample

    @classmethod
    def from_words(cls, custom: Iterable[str], *, exact_match: Iterable[str] = (), whitelist: Iterable[str] = (),
                   source: str = "given words") -> "Blocklist":
        lists = {"custom": custom, "exact_match": exact_match, "whitelist": whitelist}
        for name, words in lists.items():
            if isinstance(words, str):
                raise ValidationError(name, "expected a list of words, got one string.", f"pass {name}=[{words!r}].")
            lists[name] = tuple(w.strip() for w in words if isinstance(w, str) and w.strip())
        return cls(**lists, source=source)

    @classmethod
    def from_folder(cls, folder: str | Path) -> "Blocklist":
        """The lists of a ``blocklist`` folder, or of a Cosmos-Guardrail1 checkpoint folder that holds one."""
        root = Path(folder).expanduser()
        if (root / _GUARD["checkpoint_subfolder"]).is_dir():
            root = root / _GUARD["checkpoint_subfolder"]
        if not (root / _FOLDERS["blocklist_words"]).is_dir():
            raise ValidationError("blocklist", f"{root} has no {_FOLDERS['blocklist_words']}/ folder of words.",
                                  f"pass the 'blocklist' folder of a {CHECKPOINT['repository']} download "
                                  f"(huggingface-cli download {CHECKPOINT['repository']} --revision "
                                  f"{CHECKPOINT['revision']}).")

        def read(name: str) -> tuple[str, ...]:
            # utils.read_keyword_list_from_dir: every file of the folder, each line stripped. Blank lines are
            # skipped here: one in an exact-match list would match every prompt.
            sub = root / _FOLDERS[name]
            files = sorted(p for p in sub.iterdir() if p.is_file()) if sub.is_dir() else []
            return tuple(line.strip() for p in files for line in p.read_text(errors="replace").splitlines()
                         if line.strip())

        return cls(read("blocklist_words"), read("exact_match_words"), read("whitelist_words"),
                   source=str(root), complete=True)

    @classmethod
    def find_cached(cls) -> "Blocklist | None":
        """The lists from the Hugging Face cache, where the framework's guardrail downloaded them, if there."""
        hub = Path(os.environ.get("HF_HUB_CACHE") or Path(os.environ.get("HF_HOME", "~/.cache/huggingface"))
                   / "hub").expanduser()
        repo = hub / ("models--" + CHECKPOINT["repository"].replace("/", "--")) / "snapshots"
        for snapshot in [repo / CHECKPOINT["revision"], *sorted(repo.glob("*"))]:
            if (snapshot / _GUARD["checkpoint_subfolder"] / _FOLDERS["blocklist_words"]).is_dir():
                return cls.from_folder(snapshot)
        return None

    @classmethod
    def known_subset(cls) -> "Blocklist":
        """Only the entries shown blocked in public: passing it does not mean the real guardrail passes."""
        return cls(tuple(KNOWN_BLOCKED), source=f"known subset ({KNOWN_SOURCE})")


@dataclass(frozen=True)
class BlockedWord:
    """A word (as written in the text) that an entry of the list matches, by which pass, and how to fix it."""

    word: str
    entry: str
    rule: str

    @property
    def fix(self) -> str:
        better = KNOWN_BLOCKED.get(self.entry.lower())
        hint = f" (NVIDIA replaced it with {better!r})" if better else ""
        return f"reword {self.word!r}{hint}; the guardrail refuses the whole prompt for it."

    def __str__(self) -> str:
        return f"{self.word!r} matches blocklist entry {self.entry!r} ({self.rule}). Fix: {self.fix}"


def find_blocked(text: str, blocklist: Blocklist) -> list[BlockedWord]:
    """Every word of ``text`` the guardrail's blocklist passes would match (the guardrail stops at the first)."""
    text = re.sub(r"[^\x00-\x7F]+", " ", text).replace("\x00", "")  # to_ascii, then the sentinel removed
    custom = tuple(sorted({w.lower() for w in blocklist.custom} - {w.lower() for w in blocklist.whitelist}))
    found = _censor_pass(_normalize(text), custom, "blocklist")
    tokens = re.findall(r"[A-Za-z0-9]+|[^\sA-Za-z0-9]", text)
    known = frozenset(custom)
    lemmatized = " ".join(_lemma(token, known) for token in tokens)
    found += _censor_pass(_normalize(lemmatized), custom, "blocklist, after lemmatising")
    found += _exact_pass(text, blocklist.exact_match)
    once = {}
    for hit in found:  # a word the first pass caught is reported once, by that pass
        once.setdefault((hit.word.lower(), hit.entry), hit)
    return list(once.values())


def _normalize(text: str) -> str:
    """``Blocklist.normalize_for_matching``: NFKC, combining marks dropped, invisibles to spaces, spaces collapsed."""
    text = unicodedata.normalize("NFKC", text)
    text = "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))
    return " ".join(_INVISIBLE.sub(" ", text).split())


def _censor_pass(text: str, entries: tuple[str, ...], rule: str) -> list[BlockedWord]:
    """better-profanity's censor: a word, or it with the next words (joined with their separators or without),
    equal to an entry; runs are tried first (shortest first, up to as many words as an entry has separators),
    then the word alone."""
    if not entries:
        return []
    longest = max(1, max(sum(c not in _WORD_CHARS for c in e) for e in entries))
    spans, found, index, trie = [m.span() for m in _WORD.finditer(text)], [], 0, _trie(entries)
    while index < len(spans):
        for extra in (*range(1, min(longest, len(spans) - 1 - index) + 1), 0):  # words after this one
            start, end = spans[index][0], spans[index + extra][1]
            joined = "".join(text[a:b] for a, b in spans[index: index + extra + 1]).lower()
            match = _first(trie, (text[start:end].lower(), joined))
            if match:
                found.append(BlockedWord(text[start:end], match, rule))
                break
        index += extra + 1  # past the run matched, else (extra 0) past this word
    return found


# text character -> the entry characters it can stand for (itself, and what it is a look-alike of)
_STANDS_FOR: dict[str, frozenset[str]] = {
    variant: frozenset({variant, *(letter for letter, of in _LOOKALIKE.items() if variant in of)})
    for variants in _LOOKALIKE.values() for variant in variants}
_END = ""  # trie key marking a complete entry (no character is empty)


def _trie(entries: tuple[str, ...]) -> dict:
    root: dict = {}
    for entry in entries:
        node = root
        for char in entry:
            node = node.setdefault(char, {})
        node[_END] = entry
    return root


def _first(trie: dict, forms: tuple[str, ...]) -> str | None:
    """The entry some form equals, look-alikes included (a walk of the entries' trie: long lists stay fast)."""
    for form in forms:
        nodes = [trie]
        for char in form:
            nodes = [node[c] for node in nodes for c in _STANDS_FOR.get(char, (char,)) if c in node]
            if not nodes:
                break
        found = sorted(node[_END] for node in nodes if _END in node)
        if found:
            return found[0]
    return None


def _lemma(token: str, entries: frozenset[str]) -> str:
    """``WordNetLemmatizer().lemmatize(token)``, as far as it matters here: a lower-case plural whose noun-rule
    singular is an entry becomes that entry (WordNet lookups are case-sensitive, so capitals stay)."""
    if token != token.lower():
        return token
    for suffix, ending in _NOUN_RULES:
        if token.endswith(suffix) and token[: len(token) - len(suffix)] + ending in entries:
            return token[: len(token) - len(suffix)] + ending
    return token


def _exact_pass(text: str, entries: Iterable[str]) -> list[BlockedWord]:
    """``check_against_whole_word_blocklist``: whole words, then near matches of long entries."""
    prompt = re.sub(r"\s+", " ", text).strip().lower()
    words, found = prompt.split(), []

    @functools.cache
    def runs(size: int) -> tuple[list[str], frozenset[str]]:  # the prompt's runs of ``size`` words
        listed = [" ".join(words[i: i + size]) for i in range(len(words) - size + 1)]
        return listed, frozenset(listed)

    for entry in dict.fromkeys(re.sub(r"\s+", " ", e).strip().lower() for e in entries):
        if hit := re.search(r"\b" + re.escape(entry) + r"\b", prompt):
            found.append(BlockedWord(hit.group(0), entry, "exact-match list"))
        elif len(entry) >= PARTIAL_MIN_CHARS and (near := _near_match(entry, runs(len(entry.split())))):
            found.append(BlockedWord(near, entry, "exact-match list, near match"))
    return found


def _near_match(entry: str, runs: tuple[list[str], frozenset[str]]) -> str | None:
    """``check_partial_match``: a run of as many words as ``entry`` with a ``SequenceMatcher`` ratio of at least
    (n - 0.4) / n, n the entry's length. Under 1 letter, only an identical run meets it (ratio 2M / (|run| + n),
    M <= min(|run|, n) matched), so the runs are compared as strings; any other setting takes the matcher."""
    if PARTIAL_LETTERS < 1:
        return entry if entry in runs[1] else None
    threshold = (len(entry) - PARTIAL_LETTERS) / len(entry)
    matcher = SequenceMatcher(None)
    matcher.set_seq2(entry)
    for run in runs[0]:
        matcher.set_seq1(run)
        if matcher.real_quick_ratio() >= threshold and matcher.quick_ratio() >= threshold \
                and matcher.ratio() >= threshold:
            return run
    return None
