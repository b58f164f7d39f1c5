"""Answer-level metrics: does the retrieved text contain the answers, and is a generated
answer right?

Every function takes plain inputs (strings, lists of strings, answer parts) and returns a
float or one value per item; :func:`answer_metrics` returns every metric that applies to
one generated answer as a flat dict, one row of a tidy results table (as
:func:`divopt_rag.experiments.measures.metrics.selection_metrics` does for selections).

Conventions
-----------
* *Answer parts* (``answer_groups``): a list of parts, each a list of aliases, as
  :meth:`divopt_rag.data.Dataset.answer_groups_for` gives them. A part is matched when any of its
  aliases is; a multi-part answer (RGB integration, QAMPARI, ASQA) needs every part.
* *References* (``references``): alternative gold strings for F1/EM; the score is the
  maximum over them (SQuAD's ``metric_max_over_ground_truths``).
* Each metric is the published one with the published defaults; a paper-specific variant
  is a named option whose docstring cites the code it transcribes (read, never copied):

  ============================  ========================================================
  metric                        source
  ============================  ========================================================
  :func:`normalize_answer`      SQuAD v1.1 official evaluation script (also LongBench's
                                ``metrics.py``, QAMPARI's ``reader_metrics.py``)
  :func:`token_f1` "squad"      SQuAD v1.1 / LongBench ``qa_f1_score`` (multiset overlap)
  :func:`token_f1` "dfrag"      DF-RAG's public ``run_dfrag.py`` (``calculate_f1_score``)
  :func:`token_f1` "mio"        the MIO report's ``rag_llm_evaluation.ipynb`` (set overlap)
  :func:`answer_recall`         the CCBQP paper's ``eval_retrieval_qampari.py``
  :func:`rgb_labels`            RGB's ``evalue.py`` (``checkanswer`` / ``predict``)
  :func:`component_ndcg`        nDCG@k per answer component (ir-measures, trec_eval's)
  :func:`list_prf`              QAMPARI's ``reader_metrics.py`` (answer-list P/R/F1)
  :func:`embedding_scores`      the MIO report's ``compute_embedding_metrics``
  :func:`bertscore`             BERTScore (Zhang et al., 2020) through ``bert-score``
  ============================  ========================================================
"""
from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from divopt_rag.experiments.measures.metrics import ir_scores
from divopt_rag.models.extras import require
from divopt_rag.models.validation import check_choice, check_scalar

__all__ = [
    "normalize_answer",
    "exact_match",
    "token_f1",
    "F1_STYLES",
    "answer_hits",
    "answer_recall",
    "string_match",
    "rgb_labels",
    "rgb_correct",
    "component_ndcg",
    "split_list_answer",
    "list_prf",
    "embedding_scores",
    "bertscore",
    "answer_metrics",
]

#: Tokenizations of :func:`token_f1` (see its docstring).
F1_STYLES = ("squad", "dfrag", "mio")

_PUNCT = set(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


# --------------------------------------------------------------------------------------------
# Normalization, exact match, token F1
# --------------------------------------------------------------------------------------------
def normalize_answer(s: str) -> str:
    """SQuAD v1.1 normalization: lower-case, drop ASCII punctuation, drop the articles
    a/an/the, collapse whitespace."""
    s = "".join(ch for ch in s.lower() if ch not in _PUNCT)
    return " ".join(_ARTICLES.sub(" ", s).split())


def _references(references: str | Sequence[str], name: str = "references") -> list[str]:
    refs = [references] if isinstance(references, str) else list(references)
    if not refs or not all(isinstance(r, str) for r in refs):
        raise ValueError(f"{name} must be a string or a non-empty list of strings, got {references!r}")
    return refs


def _check_text(x: Any, name: str) -> str:
    if not isinstance(x, str):
        raise TypeError(f"{name} must be a string, got {type(x).__name__}")
    return x


def exact_match(prediction: str, references: str | Sequence[str]) -> float:
    """1.0 if the SQuAD-normalized prediction equals a normalized reference, else 0.0."""
    pred = normalize_answer(_check_text(prediction, "prediction"))
    return float(any(pred == normalize_answer(r) for r in _references(references)))


def _f1_tokens(text: str, style: str) -> list[str]:
    if style == "squad":
        return normalize_answer(text).split()
    if style == "dfrag":
        return re.findall(r"\w+", text.lower())
    # mio: lower-case, strip, drop every non-word non-space character, split
    return re.sub(r"[^\w\s]", "", text.lower().strip()).split()


def _f1_one(prediction: str, reference: str, style: str) -> float:
    pred, gold = _f1_tokens(prediction, style), _f1_tokens(reference, style)
    if style == "mio":
        p_set, g_set = set(pred), set(gold)
        common = len(p_set & g_set)
        if not p_set or not g_set or common == 0:
            return 0.0
        precision, recall = common / len(p_set), common / len(g_set)
        return 2 * precision * recall / (precision + recall)
    if style == "dfrag" and not pred and not gold:
        return 1.0
    common = sum((Counter(pred) & Counter(gold)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(pred), common / len(gold)
    return 2 * precision * recall / (precision + recall)


def token_f1(prediction: str, references: str | Sequence[str], *, style: str = "squad") -> float:
    """Token-overlap F1 between a prediction and its best reference.

    With tokens P (prediction) and G (reference) and overlap c:
    precision = c/|P|, recall = c/|G|, F1 = 2 precision recall / (precision + recall), 0 when
    c = 0; the score is max over references. ``style`` picks the published tokenization:

    * ``"squad"`` (default): SQuAD v1.1's, identical to LongBench's ``qa_f1_score``:
      :func:`normalize_answer` then split; c = size of the multiset intersection.
    * ``"dfrag"``: DF-RAG's public script: tokens ``re.findall(r"\\w+", text.lower())``
      (articles and underscores kept); multiset overlap; two empty token lists score 1.
      That script scores against the first gold answer only: pass ``references=answers[0]``.
    * ``"mio"``: the MIO report's notebook: lower-case, remove ``[^\\w\\s]``, split, and
      compare *sets* of tokens (repeated words count once).
    """
    check_choice(style, "style", F1_STYLES)
    pred = _check_text(prediction, "prediction")
    return max(_f1_one(pred, r, style) for r in _references(references))


# --------------------------------------------------------------------------------------------
# Answers contained in retrieved passages (CCBQP's answer recall) and in generated text (RGB)
# --------------------------------------------------------------------------------------------
def _check_groups(answer_groups: Any) -> list[list[str]]:
    if isinstance(answer_groups, str) or not isinstance(answer_groups, Sequence):
        raise TypeError(f"answer_groups must be a list of parts (lists of aliases), got {answer_groups!r}")
    groups = []
    for i, part in enumerate(answer_groups):
        aliases = [part] if isinstance(part, str) else list(part)
        if not aliases or not all(isinstance(a, str) for a in aliases):
            raise ValueError(f"answer_groups[{i}] must be a non-empty list of alias strings, got {part!r}")
        groups.append(aliases)
    return groups


def _contains(text: str, alias: str, normalize: str) -> bool:
    if normalize == "lower":
        return alias.lower() in text
    a = normalize_answer(alias)
    return bool(a) and f" {a} " in text


def answer_hits(passages: str | Sequence[str], answer_groups: Sequence[Any], *, normalize: str = "lower") -> list[bool]:
    """For each answer part: is any of its aliases contained in the passages?

    The passages are joined with single spaces into one text (the CCBQP paper's code does
    this, so an alias spanning two passages also counts). ``normalize``:

    * ``"lower"`` (default, the CCBQP paper's ``answer_recall``): ``alias.lower() in
      text.lower()``, a raw substring test ("art" is found in "party");
    * ``"squad"``: SQuAD normalization of both sides and whole-token containment
      (`` alias `` in `` text `` after :func:`normalize_answer`), divopt's stricter reading.
    """
    check_choice(normalize, "normalize", ("lower", "squad"))
    text = passages if isinstance(passages, str) else " ".join(_check_text(p, "passages[i]") for p in passages)
    text = text.lower() if normalize == "lower" else f" {normalize_answer(text)} "
    return [any(_contains(text, a, normalize) for a in part) for part in _check_groups(answer_groups)]


def answer_recall(passages: str | Sequence[str], answer_groups: Sequence[Any], *, normalize: str = "lower") -> float:
    """Fraction of answer parts found in the passages (:func:`answer_hits`): the CCBQP
    paper's answer recall@k when ``passages`` are the top-k texts. NaN without answers."""
    hits = answer_hits(passages, answer_groups, normalize=normalize)
    return sum(hits) / len(hits) if hits else float("nan")


def string_match(prediction: str, answer_groups: Sequence[Any]) -> list[int]:
    """RGB's ``checkanswer``: per answer part, 1 if the lower-cased prediction contains one of
    its lower-cased aliases, else 0."""
    pred = _check_text(prediction, "prediction").lower()
    return [int(any(a.lower() in pred for a in part)) for part in _check_groups(answer_groups)]


def rgb_labels(prediction: str, answer_groups: Sequence[Any], *, chinese: bool = False) -> list[int]:
    """RGB's labels for one generated answer (``evalue.py``, ``predict``): ``[-1]`` when the
    model declines ("insufficient information" / 信息不足), else :func:`string_match`. For the
    Chinese files RGB first removes the prediction's spaces (``chinese=True``)."""
    pred = _check_text(prediction, "prediction")
    if chinese:
        pred = pred.replace(" ", "")
    if "信息不足" in pred or "insufficient information" in pred:
        return [-1]
    return string_match(pred, answer_groups)


def rgb_correct(prediction: str, answer_groups: Sequence[Any], *, chinese: bool = False) -> bool:
    """RGB's accuracy for one answer (noise rate < 1): every part matched and no decline
    (``0 not in label and 1 in label``)."""
    labels = rgb_labels(prediction, answer_groups, chinese=chinese)
    return 0 not in labels and 1 in labels


# --------------------------------------------------------------------------------------------
# Retrieval quality per answer component (RGB integration questions)
# --------------------------------------------------------------------------------------------
def component_ndcg(ranked_ids: Sequence[Any], components: Mapping[Any, Any], k: int | None = None) -> dict[str, float]:
    """nDCG@k of a ranking against each answer component separately.

    ``components``: passage id -> component label (``Dataset.subtopics_for`` on RGB's
    ``en_int``, labels ``part<g>``). Component c's qrels are its passages (grade 1); the
    value is trec_eval's nDCG@k (linear gains, log2 discounts) computed by ir-measures.
    Returns {label: nDCG@k}, labels sorted; the mean over labels is the question's
    per-component nDCG.
    """
    if not isinstance(components, Mapping):
        raise TypeError(f"components must be a mapping passage id -> component label, got {type(components).__name__}")
    ranked = [str(r) for r in ranked_ids]
    k = len(ranked) if k is None else k
    qrels: dict[str, dict[str, int]] = {}
    for pid, label in components.items():
        qrels.setdefault(str(label), {})[str(pid)] = 1
    if not qrels:
        return {}
    scores = ir_scores({c: ranked for c in qrels}, qrels, k, ("nDCG",))
    return {c: scores[c][f"nDCG@{k}"] for c in sorted(qrels)}


# --------------------------------------------------------------------------------------------
# List answers (QAMPARI): precision, recall, F1 of the predicted answers
# --------------------------------------------------------------------------------------------
def split_list_answer(text: str, sep: str = ",") -> list[str]:
    """Items of a generated list answer: citation marks ``[3]`` removed, split on ``sep``
    (ALCE's QAMPARI instruction asks for comma-separated answers), stripped of spaces and a
    trailing period; empty items dropped. divopt's parser (no paper prints one)."""
    text = re.sub(r"\[\d+\]", "", _check_text(text, "text"))
    items = (item.strip().rstrip(".").strip() for item in text.split(sep))
    return [item for item in items if item]


def list_prf(predicted: Sequence[str], answer_groups: Sequence[Any]) -> tuple[float, float, float]:
    """QAMPARI's answer-list metric (``reader_metrics.py``, ``compute_metrics_qampari``).

    A distinct predicted item matches a gold answer when it equals one of the answer's
    aliases after SQuAD normalization; with M the gold answers matched by some item:
    precision = |M| / |distinct predicted items|, recall = |M| / |gold answers|,
    F1 = their harmonic mean (0 when either is 0). Precision is 0 for an empty prediction.
    """
    groups = _check_groups(answer_groups)
    items = set(_check_text(p, "predicted[i]") for p in predicted)
    norm_groups = [{normalize_answer(a) for a in part} for part in groups]
    matched = {j for item in items for j, g in enumerate(norm_groups) if normalize_answer(item) in g}
    precision = len(matched) / len(items) if items else 0.0
    recall = len(matched) / len(groups) if groups else float("nan")
    f1 = 0.0 if precision == 0 or not recall else 2 * precision * recall / (precision + recall)
    return precision, recall, f1


# --------------------------------------------------------------------------------------------
# Semantic similarity to the gold answer: answer embeddings, BERTScore (MIO report)
# --------------------------------------------------------------------------------------------
def _encode(embedder: Any, texts: list[str]) -> np.ndarray:
    if hasattr(embedder, "encode"):
        out = embedder.encode(texts, convert_to_numpy=True, show_progress_bar=False)
    elif callable(embedder):
        out = embedder(texts)
    else:
        raise TypeError(f"embedder must have .encode(texts) (a SentenceTransformer) or be callable, got {embedder!r}")
    arr = np.asarray(out.detach().cpu() if hasattr(out, "detach") else out, dtype=np.float64)
    if arr.shape[0] != len(texts) or arr.ndim != 2:
        raise ValueError(f"embedder returned shape {arr.shape} for {len(texts)} texts; expected ({len(texts)}, d)")
    return arr


def embedding_scores(predictions: Sequence[str], references: Sequence[str], embedder: Any) -> dict[str, np.ndarray]:
    """Cosine similarity and Euclidean / Manhattan distances between the embeddings of each
    prediction and its reference, after L2-normalizing both (the MIO report's metrics).

    embedder : a SentenceTransformer (anything with ``.encode(texts)``) or a callable
        ``texts -> (n, d) array``. Returns {"cosine", "euclidean", "manhattan"}: arrays of
        length n. A zero embedding gives NaN.
    """
    preds, refs = list(predictions), list(references)
    if len(preds) != len(refs):
        raise ValueError(f"predictions and references must have the same length, got {len(preds)} and {len(refs)}")
    if not preds:
        return {m: np.zeros(0) for m in ("cosine", "euclidean", "manhattan")}
    emb = _encode(embedder, preds + refs)
    norms = np.linalg.norm(emb, axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        emb = np.where(norms > 0, emb / norms, np.nan)
    a, b = emb[: len(preds)], emb[len(preds):]
    return {
        "cosine": np.einsum("ij,ij->i", a, b),
        "euclidean": np.linalg.norm(a - b, axis=1),
        "manhattan": np.abs(a - b).sum(axis=1),
    }


def bertscore(
    predictions: Sequence[str],
    references: Sequence[str | Sequence[str]],
    model: str | Path,
    *,
    num_layers: int | None = None,
    idf: bool = False,
    batch_size: int = 64,
    device: str = "cpu",
) -> dict[str, np.ndarray]:
    """BERTScore precision, recall and F1 (Zhang et al., 2020) with a local model folder.

    With contextual embeddings x_i (reference tokens) and y_j (candidate tokens) from layer
    ``num_layers``, L2-normalized: R = mean_i max_j x_i.y_j, P = mean_j max_i x_i.y_j,
    F = 2PR/(P+R); the means leave out [CLS]/[SEP] (``idf`` weights them by inverse document
    frequencies over the references), the maxima range over all tokens (bert-score's
    ``greedy_cos_idf``). Computed by the ``bert-score`` package (``BERTScorer``); several
    references per prediction give the best.

    model : a local model folder (the Hugging Face hub is not used); ``num_layers`` defaults
        to bert-score's published layer for a folder named like a model it knows (e.g.
        ``distilbert-base-uncased`` -> 5, the MIO report's default model), else is required.
    Returns {"precision", "recall", "f1"}: arrays of length n. Baseline rescaling is off
    (bert-score's default and the MIO report's setting).
    """
    # optional heavy import (transformers): only when BERTScore is asked for
    bert_score = require("bert_score", "BERTScore (divopt_rag.experiments.rag.answers.bertscore)")
    from bert_score.utils import model2layers

    folder = Path(model)
    if not folder.is_dir():
        raise ValueError(f"model must be a local model folder (config.json, weights, tokenizer), got {str(model)!r}")
    if num_layers is None:
        num_layers = model2layers.get(folder.name)
        if num_layers is None:
            raise ValueError(f"num_layers is required for {folder.name!r} (not a model bert-score knows a layer for)")
    num_layers = check_scalar(num_layers, "num_layers", int, min_val=0)
    preds = [_check_text(p, "predictions[i]") for p in predictions]
    refs = [r if isinstance(r, str) else list(_references(r, "references[i]")) for r in references]
    if len(preds) != len(refs):
        raise ValueError(f"predictions and references must have the same length, got {len(preds)} and {len(refs)}")
    if not preds:
        return {m: np.zeros(0) for m in ("precision", "recall", "f1")}
    scorer = bert_score.BERTScorer(model_type=str(folder), num_layers=num_layers, idf=idf, device=device)
    tok = scorer._tokenizer
    # tokenizers saved without model_max_length report ~1e30, which transformers>=5 refuses
    # as a truncation length: cap it at the model's positions (bert-score passes it through)
    limit = getattr(scorer._model.config, "max_position_embeddings", 512) or 512
    if not tok.model_max_length or tok.model_max_length > limit:
        tok.model_max_length = int(limit)
    if idf:
        scorer.compute_idf([r for ref in refs for r in ([ref] if isinstance(ref, str) else ref)])
    if any(not isinstance(r, str) for r in refs):
        refs = [[r] if isinstance(r, str) else r for r in refs]
    P, R, F = scorer.score(preds, refs, batch_size=batch_size)
    return {"precision": P.numpy().astype(np.float64), "recall": R.numpy().astype(np.float64),
            "f1": F.numpy().astype(np.float64)}


# --------------------------------------------------------------------------------------------
# Everything that applies, as one row
# --------------------------------------------------------------------------------------------
def answer_metrics(
    prediction: str | None,
    answer_groups: Sequence[Any],
    *,
    passages: Sequence[str] | None = None,
    f1_style: str = "squad",
    list_sep: str | None = None,
) -> dict[str, float]:
    """Every answer-level metric that applies, as a flat dict (one tidy row).

    With ``passages`` (the retrieved top-k texts): ``answer_recall`` (CCBQP) and
    ``answer_recall_squad``. With a ``prediction``: ``em`` and ``f1`` (best alias over all
    parts, ``f1_style``), ``str_match`` (fraction of parts matched, ASQA's STR-EM / RGB's
    per-part labels) and ``rgb_correct`` (1.0 when every part is matched and the model did not
    decline); with ``list_sep`` also ``list_precision``, ``list_recall``, ``list_f1`` of the
    items split on it (:func:`list_prf`).
    """
    groups = _check_groups(answer_groups)
    out: dict[str, float] = {}
    if passages is not None:
        out["answer_recall"] = answer_recall(passages, groups)
        out["answer_recall_squad"] = answer_recall(passages, groups, normalize="squad")
    if prediction is not None:
        aliases = [a for part in groups for a in part]
        out["em"] = exact_match(prediction, aliases) if aliases else float("nan")
        out["f1"] = token_f1(prediction, aliases, style=f1_style) if aliases else float("nan")
        labels = string_match(prediction, groups)
        out["str_match"] = sum(labels) / len(labels) if labels else float("nan")
        out["rgb_correct"] = float(rgb_correct(prediction, groups)) if groups else float("nan")
        if list_sep is not None:
            p, r, f = list_prf(split_list_answer(prediction, list_sep), groups)
            out.update(list_precision=p, list_recall=r, list_f1=f)
    return out

