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
"""
from __future__ import annotations

import os
from collections import deque
from pathlib import Path
from typing import Iterable, Sequence

from .dataset import DataFormatError, Dataset

__all__ = ["load_wordnet", "wordnet_benchmark", "find_wordnet_dir", "DEFAULT_WORDS", "read_noun_index", "read_synset"]

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

    Returns {offset, lemmas, definition, examples, hyponyms}."""
    fh.seek(offset)
    raw = fh.readline().decode("utf-8", errors="replace").rstrip("\n")

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
    return {"offset": offset, "lemmas": lemmas, "definition": definition, "examples": examples, "hyponyms": hyponyms}


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
    """
    root = find_wordnet_dir(wordnet_dir)
    index_path, data_path = root / "index.noun", root / "data.noun"
    if min_senses < 1 or hyponym_depth < 0 or max_hyponyms < 0:
        raise ValueError(
            f"min_senses must be >= 1, hyponym_depth and max_hyponyms >= 0; got {min_senses}, {hyponym_depth}, {max_hyponyms}"
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
        },
    )


# Alias under the name the issue text suggests.
wordnet_benchmark = load_wordnet
