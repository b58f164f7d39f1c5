"""WordNet ambiguity benchmark: real database when installed, plus tiny fixture files in the
wndb(5) format written by the test (byte offsets computed here)."""
from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from divopt_rag.data import DataFormatError, load_wordnet
from divopt_rag.data.wordnet import find_wordnet_dir, load_wordnet_glosses, read_synset, read_synsets

try:
    WN = find_wordnet_dir()
except FileNotFoundError:
    WN = None
needs_wordnet = pytest.mark.skipif(WN is None, reason="WordNet database absent: apt-get install wordnet-base")


@needs_wordnet
def test_bank_has_several_labelled_senses():
    ds = load_wordnet(["bank", "bass", "crane"])
    labels = ds.subtopics_for("bank")
    senses = Counter(labels.values())
    assert len(senses) >= 5  # WordNet 3.0 has 10 noun senses of "bank"
    assert "bank#n#1" in senses and "bank#n#2" in senses
    # every labelled passage is judged, sense glosses with grade 2
    assert set(labels) == set(ds.qrels["bank"])
    river = ds.passage_index("wn09213565.g")  # bank#n#1 sloping land, offset from index.noun
    assert "sloping land" in ds.texts[river] and labels["wn09213565.g"] == "bank#n#1"
    assert ds.qrels["bank"]["wn09213565.g"] == 2
    assert ds.qrels["bank"]["wn09415584.g"] == 1  # riverbank: a hyponym of bank#n#1
    finance = [ds.texts[ds.passage_index(p)] for p, l in labels.items() if l == "bank#n#2"]
    assert any("financial institution" in t for t in finance)
    assert any("cashed a check" in t for t in finance)  # examples are passages too
    # one shared pool: passages of all three words, ids unique
    assert len(set(ds.passage_ids)) == ds.n_passages
    assert {"bank", "bass", "crane"} == set(ds.query_ids)
    assert len(set(ds.subtopics_for("bass").values())) >= 5


@needs_wordnet
def test_default_words_and_options():
    ds = load_wordnet()
    assert ds.n_queries == 20 and all(len(set(ds.subtopics_for(q).values())) >= 2 for q in ds.query_ids)
    small = load_wordnet(["bank"], max_senses=2, hyponym_depth=0, include_examples=False)
    assert set(small.subtopics_for("bank").values()) == {"bank#n#1", "bank#n#2"}
    assert small.n_passages == 2  # one gloss per sense, nothing else
    top = load_wordnet(n_words=5)
    assert top.n_queries == 5 and top.query_ids == load_wordnet(n_words=5).query_ids
    with pytest.raises(ValueError, match="not found as WordNet nouns.*qwertyzz"):
        load_wordnet(["bank", "qwertyzz"])
    with pytest.raises(ValueError, match="fewer than min_senses"):
        load_wordnet(["bank"], min_senses=50)


def _write_fixture(root: Path, corrupt: bool = False) -> dict:
    """A 4-synset noun database: 'bat' has two senses; sense 1 has one hyponym."""
    header = "  1 This is a license header line\n"
    records = {
        "club": ("00000000 04 n 01 bat 0 001 ~ HYPOHYPO n 0000 | a club used for hitting a ball; \"he swung the bat\"\n"),
        "animal": ("00000000 05 n 01 bat 1 000 | nocturnal mouselike mammal; \"bats use echolocation\"; \"a bat flew by\"\n"),
        "hypo": ("00000000 04 n 02 cricket_bat 0 bat 0 000 | the flat bat used in cricket\n"),
    }
    # compute byte offsets in order, padding each record's offset field (8 digits)
    offsets, body, pos = {}, "", len(header.encode())
    for name in ("club", "animal", "hypo"):
        offsets[name] = pos
        pos += len(records[name].encode())
    for name in ("club", "animal", "hypo"):
        rec = records[name].replace("00000000", f"{offsets[name]:08d}", 1).replace("HYPOHYPO", f"{offsets['hypo']:08d}")
        if corrupt and name == "animal":
            rec = rec.replace(" | ", " ")  # no gloss separator
        body += rec
    (root / "data.noun").write_text(header + body)
    (root / "index.noun").write_text(
        header + f"bat n 2 1 ~ 2 1 {offsets['club']:08d} {offsets['animal']:08d}  \n" + "cat n 1 0 1 0 00000001  \n"
    )
    return offsets


def test_fixture_database_parsed_exactly(tmp_path):
    offsets = _write_fixture(tmp_path)
    ds = load_wordnet(["bat"], wordnet_dir=tmp_path)
    labels = ds.subtopics_for("bat")
    c, a, h = (f"wn{offsets[k]:08d}" for k in ("club", "animal", "hypo"))
    assert labels == {
        f"{c}.g": "bat#n#1", f"{c}.e0": "bat#n#1", f"{h}.g": "bat#n#1",
        f"{a}.g": "bat#n#2", f"{a}.e0": "bat#n#2", f"{a}.e1": "bat#n#2",
    }
    assert ds.qrels["bat"][f"{h}.g"] == 1 and ds.qrels["bat"][f"{c}.g"] == 2
    assert ds.texts[ds.passage_index(f"{h}.g")] == "cricket bat, bat: the flat bat used in cricket"
    assert ds.texts[ds.passage_index(f"{a}.e1")] == "a bat flew by"
    with pytest.raises(ValueError, match="fewer than min_senses=2.*cat"):
        load_wordnet(["cat"], wordnet_dir=tmp_path)


def test_fixture_malformed_names_file_offset_and_field(tmp_path):
    offsets = _write_fixture(tmp_path, corrupt=True)
    with pytest.raises(DataFormatError, match=rf"data.noun: field 'gloss': synset at byte offset {offsets['animal']}"):
        load_wordnet(["bat"], wordnet_dir=tmp_path)
    with open(tmp_path / "data.noun", "rb") as fh, pytest.raises(DataFormatError, match="synset_offset"):
        read_synset(fh, offsets["club"] + 1, tmp_path / "data.noun")
    (tmp_path / "index.noun").write_text("bat n two 1 ~ 2 1 00000001\n")
    with pytest.raises(DataFormatError, match=r"index.noun:1: field"):
        load_wordnet(["bat"], wordnet_dir=tmp_path)


def test_missing_database_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="apt-get install wordnet-base"):
        load_wordnet(["bank"], wordnet_dir=tmp_path)


def test_read_synsets_walks_the_file_like_read_synset(tmp_path):
    offsets = _write_fixture(tmp_path)
    every = list(read_synsets(tmp_path / "data.noun"))
    assert [s["offset"] for s in every] == [offsets[k] for k in ("club", "animal", "hypo")]
    with open(tmp_path / "data.noun", "rb") as fh:
        assert every == [read_synset(fh, s["offset"], tmp_path / "data.noun") for s in every]
    assert every[1]["gloss"] == 'nocturnal mouselike mammal; "bats use echolocation"; "a bat flew by"'
    assert every[2]["lemmas"] == ["cricket bat", "bat"]


def test_distractors_are_unjudged_whole_glosses(tmp_path):
    offsets = _write_fixture(tmp_path)
    ds = load_wordnet(["bat"], wordnet_dir=tmp_path, hyponym_depth=0, include_examples=False, distractors=5, seed=3)
    extra = {p: ds.texts[ds.passage_index(p)] for p in ds.passage_ids if p.endswith(".x")}
    # every whole gloss differs from the two "lemmas: definition" passages, so all 3 are drawn
    assert extra == {
        f"wn{offsets['club']:08d}.x": 'a club used for hitting a ball; "he swung the bat"',
        f"wn{offsets['animal']:08d}.x": 'nocturnal mouselike mammal; "bats use echolocation"; "a bat flew by"',
        f"wn{offsets['hypo']:08d}.x": "the flat bat used in cricket",
    }
    assert not set(extra) & set(ds.qrels["bat"]) and ds.n_passages == 5
    one = load_wordnet(["bat"], wordnet_dir=tmp_path, hyponym_depth=0, include_examples=False, distractors=1, seed=3)
    assert one.passage_ids[-1] in extra and one.n_passages == 3


def test_gloss_corpus_one_passage_per_synset(tmp_path):
    offsets = _write_fixture(tmp_path)
    # a 4-letter word with the two senses of 'bat' (the corpus keeps words of >= 4 letters)
    (tmp_path / "index.noun").write_text(f"bats n 2 1 ~ 2 1 {offsets['club']:08d} {offsets['animal']:08d}  \n")
    ds = load_wordnet_glosses(1, 3, seed=0, min_senses=2, wordnet_dir=tmp_path)
    c, a, h = (f"wn{offsets[k]:08d}" for k in ("club", "animal", "hypo"))
    assert ds.query_ids == ["bats"] and ds.passage_ids == [c, a, h]
    assert ds.texts[0] == 'bat: a club used for hitting a ball; "he swung the bat"'
    assert ds.texts[2] == "cricket bat, bat: the flat bat used in cricket"
    assert ds.qrels == {"bats": {c: 1, a: 1}} and ds.subtopics_for("bats") == {c: "bats#n#1", a: "bats#n#2"}
    assert load_wordnet_glosses(1, 0, seed=0, min_senses=2, wordnet_dir=tmp_path).n_passages == 2
    with pytest.raises(ValueError, match="n_queries must be <= 1"):
        load_wordnet_glosses(2, 3, min_senses=2, wordnet_dir=tmp_path)
