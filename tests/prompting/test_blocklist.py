"""The blocklist matcher, rule by rule as the framework's guardrail applies them, and the word-list sources."""

from __future__ import annotations

import pytest

from cosmos_helpers.errors import ValidationError
from cosmos_helpers.prompting import Blocklist
from cosmos_helpers.prompting.blocklist import find_blocked

LIST = Blocklist.from_words(["bleeding", "corpse", "color bleeding", "gore"], exact_match=["kill", "war crime"],
                            whitelist=["gore"])


def _entries(text: str, blocklist: Blocklist = LIST) -> list[tuple[str, str]]:
    return [(hit.word, hit.entry) for hit in find_blocked(text, blocklist)]


@pytest.mark.parametrize("text, expected", [
    ("Bleeding edge.", [("Bleeding", "bleeding")]),                      # case-insensitive
    ("bl33d1ng", [("bl33d1ng", "bleeding")]), ("bleedinq", []),           # look-alikes: only better-profanity's
    ("bl33ding and BL33DING", [("bl33ding", "bleeding")]),               # look-alikes; reported once per word
    ("no color  bleeding here", [("color bleeding", "color bleeding")]),  # a run of words, spaces collapsed
    ("colorbleeding", []),
    ("bleedings", [("bleeding", "bleeding")]),                           # a noun plural: the lemma pass
    ("two corpses", [("corpse", "corpse")]),                             # noun lemma: the lemma pass
    ("Corpses", []),                                                     # WordNet lookups are case-sensitive
    ("gore", []),                                                        # whitelisted: taken off the list
    ("skill", []), ("they kill.", [("kill", "kill")]),                   # exact-match: whole words only
    ("a War   Crime", [("war crime", "war crime")]),
    ("ｂｌｅｅｄｉｎｇ", []),                                              # non-ASCII becomes spaces first
    ('{"look":"bleeding"}', [("bleeding", "bleeding")]),                 # quoted JSON: caught by the lemma pass
    ("", []),
])
def test_rules(text, expected):
    assert _entries(text) == expected


def test_rule_names_and_fix():
    hits = find_blocked("Two corpses; they kill; lifeless", Blocklist.from_words(
        ["corpse", "lifeless"], exact_match=["kill"]))
    assert [h.rule for h in hits] == ["blocklist", "blocklist, after lemmatising", "exact-match list"]
    assert "NVIDIA replaced it with 'inert'" in hits[0].fix and "reword 'corpse'" in hits[1].fix


def test_known_subset_is_labelled_as_a_sample():
    known = Blocklist.known_subset()
    assert known.custom == ("bleeding", "lifeless") and not known.complete and "17523" in known.source


def _write_lists(root, custom=("bleeding", ""), exact=("kill",), white=()):
    for folder, words in (("custom", custom), ("exact_match", exact), ("whitelist", white)):
        (root / folder).mkdir(parents=True)
        (root / folder / "a.txt").write_text("\n".join(words) + "\n")


def test_from_folder_reads_every_file_and_skips_blank_lines(tmp_path):
    _write_lists(tmp_path / "ckpt" / "blocklist")
    (tmp_path / "ckpt" / "blocklist" / "custom" / "b.txt").write_text("  gore \n")
    for where in (tmp_path / "ckpt", tmp_path / "ckpt" / "blocklist"):
        lists = Blocklist.from_folder(where)
        assert lists.custom == ("bleeding", "gore") and lists.exact_match == ("kill",) and lists.complete
    assert _entries("anything at all", lists) == []  # a blank line must not match every prompt


def test_from_folder_refuses_a_folder_without_lists(tmp_path):
    with pytest.raises(ValidationError, match="nvidia/Cosmos-Guardrail1"):
        Blocklist.from_folder(tmp_path)


def test_find_cached_reads_the_hugging_face_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    assert Blocklist.find_cached() is None
    _write_lists(tmp_path / "models--nvidia--Cosmos-Guardrail1" / "snapshots" / "abc" / "blocklist")
    assert Blocklist.find_cached().custom == ("bleeding",)


def test_one_string_is_not_a_list_of_words():
    with pytest.raises(ValidationError, match="custom"):
        Blocklist.from_words("bleeding")


def test_near_match_shortcut_is_the_sequence_matcher_rule():
    """At the framework's 0.4 letters the ratio bound admits only identical runs; the shortcut must agree with
    the upstream SequenceMatcher test on near misses of every kind."""
    from difflib import SequenceMatcher

    from cosmos_helpers.prompting import blocklist

    entry = "war crimes"
    runs = ["war crimes", "war crime", "war crimess", "war crimez", "wa crimes", "war  crimes", "warcrimes x"]
    threshold = (len(entry) - blocklist.PARTIAL_LETTERS) / len(entry)
    upstream = [run for run in runs if SequenceMatcher(None, run, entry).ratio() >= threshold]
    assert upstream == ["war crimes"]
    assert blocklist._near_match(entry, (runs, frozenset(runs))) == "war crimes"
    assert blocklist._near_match(entry, (runs[1:], frozenset(runs[1:]))) is None
