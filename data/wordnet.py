"""WordNet ambiguity benchmark: polysemous nouns as queries, senses as subtopics.

Built from the Princeton WordNet 3.0 database files of Debian's ``wordnet-base``
(``/usr/share/wordnet/index.noun`` and ``data.noun``), parsed directly (format: wndb(5)):

* index.noun line:  ``lemma pos synset_cnt p_cnt [ptr_symbol]*p_cnt sense_cnt tagsense_cnt
  synset_offset*synset_cnt``; the offsets are listed in sense-number order (most frequent
  sense first).
* data.noun line at byte ``synset_offset``:  ``synset_offset lex_filenum ss_type w_cnt(hex)
  [word lex_id]*w_cnt p_cnt(3 digits) [ptr_symbol synset_offset pos source/target]*p_cnt
  | gloss``; the gloss is a definition followed by quoted examples. Hyponym pointers are
  ``~`` and ``~i`` (instance hyponym).

For each word (the query) and each of its noun senses s (a subtopic, labelled
``"<word>#n#<sense number>"``) the passages are the gloss and the examples of s and of its
hyponyms down to ``hyponym_depth`` levels: a redundant cluster of passages per sense. All
words share one pool (a synset reached from two words appears once, with a label for each).
qrels grade 2 for passages of the sense synset itself and 1 for those of its hyponyms, so
subtopic recall and alpha-nDCG have real ground truth, as ASQA's ambiguous questions do.

:func:`load_wordnet_glosses` builds the simpler one-passage-per-synset corpus of
``divopt-rag bench quality`` from the same files (:func:`read_synsets` parses every record).
"""
from __future__ import annotations

import os
import random
import re
from collections import deque
from pathlib import Path
from typing import Iterable, Iterator, Sequence

import numpy as np

from .dataset import DataFormatError, Dataset

__all__ = ["load_wordnet", "load_wordnet_glosses", "find_wordnet_dir", "DEFAULT_WORDS", "read_noun_index", "read_synset",
           "read_synsets"]

# Classic ambiguous nouns (word-sense-disambiguation and search-result-diversification examples).
DEFAULT_WORDS: tuple[str, ...] = (
    "bank", "bass", "crane", "mouse", "java", "pitch", "spring", "bat", "plant", "seal",
    "club", "star", "match", "pool", "scale", "key", "mole", "organ", "palm", "cell",
)

_CANDIDATE_DIRS = ("/usr/share/wordnet", "/usr/share/wordnet/dict", "/usr/local/WordNet-3.0/dict", "/usr/local/share/wordnet")
_HYPONYM = ("~", "~i")


def find_wordnet_dir(wordnet_dir: str | os.PathLike | None = None) -> Path:
    """Directory holding index.noun and data.noun: ``wordnet_dir``, $WNSEARCHDIR, $WNHOME/dict,
    or Debian's /usr/share/wordnet. FileNotFoundError (with the install hint) when absent."""
    candidates: list[str] = []
    if wordnet_dir is not None:
        candidates.append(os.fspath(wordnet_dir))
    else:
        if os.environ.get("WNSEARCHDIR"):
            candidates.append(os.environ["WNSEARCHDIR"])
        if os.environ.get("WNHOME"):
            candidates.append(os.path.join(os.environ["WNHOME"], "dict"))
        candidates.extend(_CANDIDATE_DIRS)
    for c in candidates:
        p = Path(c)
        if (p / "index.noun").is_file() and (p / "data.noun").is_file():
            return p
    raise FileNotFoundError(
        f"WordNet database (index.noun, data.noun) not found in {candidates}; "
        "install it with `apt-get install wordnet-base` or pass wordnet_dir="
    )


def read_noun_index(path: str | os.PathLike, words: Iterable[str] | None = None) -> dict[str, tuple[list[int], int]]:
    """Parse index.noun: lemma -> (synset offsets in sense order, tagsense_cnt).

    ``words`` restricts the result (lemmas are lower case with '_' for spaces)."""
    wanted = None if words is None else {w.lower().replace(" ", "_") for w in words}
    out: dict[str, tuple[list[int], int]] = {}
    with open(path, encoding="utf-8", errors="replace") as fh:
        for lineno, line in enumerate(fh, 1):
            if line.startswith("  ") or not line.strip():
                continue  # license header lines start with two spaces
            f = line.split()
            lemma = f[0]
            if wanted is not None and lemma not in wanted:
                continue
            try:
                synset_cnt, p_cnt = int(f[2]), int(f[3])
                base = 4 + p_cnt
                tagsense_cnt = int(f[base + 1])
                offsets = [int(x) for x in f[base + 2 : base + 2 + synset_cnt]]
            except (IndexError, ValueError) as exc:
                raise DataFormatError(path, lineno, "synset_cnt/p_cnt/synset_offset", f"cannot parse index line for {lemma!r}: {exc}") from None
            if len(offsets) != synset_cnt:
                raise DataFormatError(path, lineno, "synset_offset", f"expected {synset_cnt} offsets, found {len(offsets)}")
            out[lemma] = (offsets, tagsense_cnt)
    return out


def read_synset(fh, offset: int, path: str | os.PathLike = "data.noun") -> dict:
    """Parse the data.noun record at byte ``offset`` of the open binary file ``fh``.

    Returns {offset, lemmas, gloss, definition, examples, hyponyms}."""
    fh.seek(offset)
    return _parse_record(fh.readline().decode("utf-8", errors="replace").rstrip("\n"), offset, path)


def read_synsets(path: str | os.PathLike) -> Iterator[dict]:
    """Every record of a data.noun file in file order, parsed as :func:`read_synset` does
    (license header lines, which start with two spaces, are skipped)."""
    with open(path, "rb") as fh:
        offset = 0
        for line in fh:
            if not line.startswith(b"  ") and line.strip():
                yield _parse_record(line.decode("utf-8", errors="replace").rstrip("\n"), offset, path)
            offset += len(line)


def _parse_record(raw: str, offset: int, path: str | os.PathLike) -> dict:
    def bad(field: str, problem: str) -> DataFormatError:
        return DataFormatError(path, None, field, f"synset at byte offset {offset}: {problem}")

    head, sep, gloss = raw.partition(" | ")
    if not sep:
        raise bad("gloss", "no ' | ' gloss separator")
    f = head.split()
    try:
        if int(f[0]) != offset:
            raise bad("synset_offset", f"record says {f[0]}, expected {offset:08d}")
        w_cnt = int(f[3], 16)
        lemmas = [f[4 + 2 * i].replace("_", " ") for i in range(w_cnt)]
        pos = 4 + 2 * w_cnt
        p_cnt = int(f[pos])
        ptrs = f[pos + 1 : pos + 1 + 4 * p_cnt]
    except DataFormatError:
        raise
    except (IndexError, ValueError) as exc:
        raise bad("w_cnt/word/p_cnt", f"cannot parse {raw[:80]!r}: {exc}") from None
    if len(ptrs) != 4 * p_cnt:
        raise bad("ptr", f"expected {p_cnt} pointers, found {len(ptrs) // 4}")
    hyponyms = [int(ptrs[4 * j + 1]) for j in range(p_cnt) if ptrs[4 * j] in _HYPONYM and ptrs[4 * j + 2] == "n"]
    definition, examples = _split_gloss(gloss)
    return {"offset": offset, "lemmas": lemmas, "gloss": gloss.strip(), "definition": definition,
            "examples": examples, "hyponyms": hyponyms}


def _split_gloss(gloss: str) -> tuple[str, list[str]]:
    """Definition (text before the first quoted example) and the quoted examples."""
    gloss = gloss.strip()
    q = gloss.find('"')
    definition = (gloss if q < 0 else gloss[:q]).strip().rstrip(";").strip()
    examples = [] if q < 0 else [e.strip() for e in gloss[q:].split('"')[1::2] if e.strip()]
    return definition, examples


def load_wordnet(
    words: Sequence[str] | None = None,
    *,
    wordnet_dir: str | os.PathLike | None = None,
    n_words: int | None = None,
    min_senses: int = 2,
    max_senses: int | None = None,
    hyponym_depth: int = 1,
    max_hyponyms: int = 8,
    include_examples: bool = True,
    distractors: int = 0,
    seed: int = 0,
) -> Dataset:
    """Build the WordNet ambiguity benchmark as a :class:`Dataset` (see module docstring).

    words: the polysemous nouns (default :data:`DEFAULT_WORDS`); words with fewer than
        ``min_senses`` noun senses are refused with an error naming them.
    n_words: instead of ``words``, take the ``n_words`` single-word nouns with the most
        sense-tagged senses (deterministic: ties broken alphabetically).
    max_senses: keep only the first (most frequent) senses of each word.
    hyponym_depth: levels of hyponyms whose glosses join a sense's cluster (0: none).
    max_hyponyms: cap on hyponym synsets per sense (breadth-first, file order).
    include_examples: one passage per quoted example besides the gloss passage.
    distractors: number of other noun glosses (the whole gloss text, examples included; ids
        ``wn<offset>.x``) drawn at random (``seed``) and added as unjudged passages, e.g. to time
        exact solvers on pools of realistic size. Drawn from the sorted distinct glosses not
        already passages, so the same seed gives the same pool.
    """
    root = find_wordnet_dir(wordnet_dir)
    index_path, data_path = root / "index.noun", root / "data.noun"
    if min_senses < 1 or hyponym_depth < 0 or max_hyponyms < 0 or distractors < 0:
        raise ValueError(
            f"min_senses must be >= 1, hyponym_depth, max_hyponyms and distractors >= 0; got {min_senses}, "
            f"{hyponym_depth}, {max_hyponyms}, {distractors}"
        )
    if words is not None and n_words is not None:
        raise ValueError("pass either words or n_words, not both")
    if n_words is not None:
        entries = read_noun_index(index_path)
        ranked = sorted(
            (w for w, (offs, _) in entries.items() if w.isalpha() and len(offs) >= min_senses),
            key=lambda w: (-entries[w][1], -len(entries[w][0]), w),
        )
        words = ranked[: int(n_words)]
    else:
        words = list(DEFAULT_WORDS if words is None else words)
        entries = read_noun_index(index_path, words)
    keys = [w.lower().replace(" ", "_") for w in words]
    missing = [w for w, k in zip(words, keys) if k not in entries]
    if missing:
        raise ValueError(f"words not found as WordNet nouns in {index_path}: {missing}")
    too_few = [w for w, k in zip(words, keys) if len(entries[k][0]) < min_senses]
    if too_few:
        raise ValueError(f"words with fewer than min_senses={min_senses} noun senses: {too_few}")

    passage_ids: list[str] = []
    texts: list[str] = []
    titles: list[str] = []
    seen: set[str] = set()
    qrels: dict[str, dict[str, int]] = {}
    query_subtopics: dict[str, dict[str, str]] = {}
    senses_meta: dict[str, list[dict]] = {}
    cache: dict[int, dict] = {}
    with open(data_path, "rb") as fh:

        def synset(off: int) -> dict:
            if off not in cache:
                cache[off] = read_synset(fh, off, data_path)
            return cache[off]

        def add_passages(s: dict) -> list[str]:
            off = s["offset"]
            items = [(f"wn{off:08d}.g", f"{', '.join(s['lemmas'])}: {s['definition']}")]
            if include_examples:
                items += [(f"wn{off:08d}.e{j}", ex) for j, ex in enumerate(s["examples"])]
            for pid, text in items:
                if pid not in seen:
                    seen.add(pid)
                    passage_ids.append(pid)
                    texts.append(text)
                    titles.append(s["lemmas"][0])
            return [pid for pid, _ in items]

        for word, key in zip(words, keys):
            qid = key
            offsets = entries[key][0][: max_senses or None]
            judged: dict[str, int] = {}
            labels: dict[str, str] = {}
            senses_meta[qid] = []
            for sense_no, off in enumerate(offsets, 1):
                label = f"{key}#n#{sense_no}"
                s = synset(off)
                senses_meta[qid].append({"label": label, "offset": off, "lemmas": s["lemmas"], "definition": s["definition"]})
                cluster = [(s, 2)]
                # breadth-first hyponyms, capped, so huge taxonomies (plant#n#2) stay small
                frontier = deque((h, 1) for h in s["hyponyms"])
                taken = 0
                while frontier and taken < max_hyponyms and hyponym_depth > 0:
                    h, depth = frontier.popleft()
                    hs = synset(h)
                    cluster.append((hs, 1))
                    taken += 1
                    if depth < hyponym_depth:
                        frontier.extend((x, depth + 1) for x in hs["hyponyms"])
                for syn, grade in cluster:
                    for pid in add_passages(syn):
                        if pid not in labels:  # first (more frequent) sense wins when shared
                            labels[pid] = label
                            judged[pid] = grade
            qrels[qid] = judged
            query_subtopics[qid] = labels
    if distractors:
        first_offset: dict[str, int] = {}
        for syn in read_synsets(data_path):
            first_offset.setdefault(syn["gloss"], syn["offset"])
        candidates = sorted(set(first_offset) - set(texts))
        for text in random.Random(seed).sample(candidates, min(int(distractors), len(candidates))):
            passage_ids.append(f"wn{first_offset[text]:08d}.x")
            texts.append(text)
            titles.append("")
    return Dataset(
        name="wordnet-ambiguity",
        passage_ids=passage_ids,
        texts=texts,
        titles=titles,
        query_ids=keys,
        queries=[k.replace("_", " ") for k in keys],
        qrels=qrels,
        query_subtopics=query_subtopics,
        meta={
            "source": str(root),
            "senses": senses_meta,
            "hyponym_depth": hyponym_depth,
            "max_hyponyms": max_hyponyms,
            "include_examples": include_examples,
            "distractors": int(distractors),
            "seed": seed,
        },
    )


def load_wordnet_glosses(
    n_queries: int = 25,
    corpus_size: int = 3000,
    *,
    seed: int = 0,
    min_senses: int = 6,
    wordnet_dir: str | os.PathLike | None = None,
) -> Dataset:
    """The small-pool corpus of ``divopt-rag bench quality``: one passage per noun synset.

    Queries: ``n_queries`` nouns drawn at random (``seed``) among the lower-case single words of
    at least 4 letters with at least ``min_senses`` noun senses; the query text is the word.
    Passages ``wn<offset>``, text "lemma1, lemma2: gloss" (the whole gloss, examples included):
    every sense of the query words, then other noun synsets drawn at random (same generator)
    up to ``corpus_size`` passages. qrels: each sense of a query word is relevant (grade 1), and
    its label ``"<word>#n#<sense number>"`` is its subtopic.
    """
    root = find_wordnet_dir(wordnet_dir)
    if n_queries < 1 or corpus_size < 0 or min_senses < 1:
        raise ValueError(f"n_queries and min_senses must be >= 1 and corpus_size >= 0; got {n_queries}, "
                         f"{corpus_size}, {min_senses}")
    synsets = {s["offset"]: s for s in read_synsets(root / "data.noun")}
    senses = {w: offs for w, (offs, _) in read_noun_index(root / "index.noun").items()
              if len(offs) >= min_senses and re.fullmatch(r"[a-z]{4,}", w)}
    words = sorted(senses)
    if n_queries > len(words):
        raise ValueError(f"n_queries must be <= {len(words)} (nouns with >= {min_senses} senses), got {n_queries}")
    rng = np.random.default_rng(seed)
    chosen = [words[i] for i in np.sort(rng.choice(len(words), size=n_queries, replace=False))]
    offsets = list(dict.fromkeys(o for w in chosen for o in senses[w] if o in synsets))
    others = sorted(set(synsets) - set(offsets))
    extra = max(0, corpus_size - len(offsets))
    offsets += [others[i] for i in np.sort(rng.choice(len(others), size=min(extra, len(others)), replace=False))]
    pids = [f"wn{o:08d}" for o in offsets]
    qrels = {w: {f"wn{o:08d}": 1 for o in senses[w] if o in synsets} for w in chosen}
    labels = {w: {f"wn{o:08d}": f"{w}#n#{i}" for i, o in enumerate(senses[w], 1) if o in synsets} for w in chosen}
    return Dataset(
        name="wordnet-glosses",
        passage_ids=pids,
        texts=[f"{', '.join(synsets[o]['lemmas'])}: {synsets[o]['gloss']}" for o in offsets],
        titles=[synsets[o]["lemmas"][0] for o in offsets],
        query_ids=chosen,
        queries=chosen,
        qrels=qrels,
        query_subtopics=labels,
        meta={"source": str(root), "seed": seed, "min_senses": min_senses},
    )
