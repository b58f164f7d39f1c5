"""divopt_rag.data.load_cross_encoder on a tiny random CrossEncoder saved offline to tmp_path."""
import numpy as np
import pytest
import torch

from helpers import dartboard_paper as paper
from helpers.pools import planted_duplicates, unit_query
from divopt_rag.data import CrossEncoderScorer, cross_encoder_scorer, load_cross_encoder
from divopt_rag.models import Instance
from divopt_rag.solvers import select

pytestmark = pytest.mark.slow  # imports transformers and sentence-transformers (~10 s)

WORDS = ["the", "cat", "dog", "sat", "on", "mat", "red", "blue", "ran", "far", "big", "small"]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    """A 1-layer BERT sequence classifier (num_labels = 1) with its tokenizer: a CrossEncoder dir."""
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizer

    path = tmp_path_factory.mktemp("tiny-cross-encoder")
    (path / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS) + "\n")
    BertTokenizer(str(path / "vocab.txt")).save_pretrained(str(path))
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=5 + len(WORDS), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                     intermediate_size=32, max_position_embeddings=64, num_labels=1,
                     initializer_range=1.0)  # large random weights: scores vary between pairs
    BertForSequenceClassification(cfg).save_pretrained(str(path))
    return path


def texts(n, seed):
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(WORDS, size=4)) for _ in range(n)]


def raw_logits(path, pairs):
    """The same model scored by transformers directly (an independent path to the raw logits)."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(path))
    model = AutoModelForSequenceClassification.from_pretrained(str(path)).eval()
    enc = tok([a for a, _ in pairs], [b for _, b in pairs], padding=True, truncation=True, return_tensors="pt")
    with torch.no_grad():
        return model(**enc).logits[:, 0].double().numpy()


def test_scores_are_raw_logits_and_memoized(model_dir):
    ce = load_cross_encoder(model_dir, device="cpu", batch_size=4)
    assert isinstance(ce, CrossEncoderScorer)
    pairs = [("the cat", p) for p in texts(6, 0)] + [("red dog", "the mat")]
    s = ce(pairs)
    assert s.dtype == np.float64 and s.shape == (7,)
    np.testing.assert_allclose(s, raw_logits(model_dir, pairs), rtol=1e-5, atol=1e-5)
    assert np.ptp(s) > 0.1  # not a constant model
    calls = []
    real = ce.model.predict
    ce.model.predict = lambda *a, **kw: calls.append(1) or real(*a, **kw)
    np.testing.assert_array_equal(ce(pairs[::-1]), s[::-1])  # all cached: the model is not run
    assert calls == []
    assert ce([]).shape == (0,)


def test_dartboard_cc_with_a_real_cross_encoder(model_dir):
    """D-CC through the loaded scorer equals the paper's transcription on the scorer's scores."""
    ce = load_cross_encoder(model_dir, device="cpu")
    n = 12
    passages, query = texts(n, 1), "the big cat"
    E, q = planted_duplicates(4, 3, 8, 2), unit_query(8, 2)
    qs = ce([(query, p) for p in passages])
    ps = ce([(a, b) for a in passages for b in passages]).reshape(n, n)
    for sigma in (0.05, 0.3):
        got = select(Instance(E, q, k=4, theta=0.5), "dartboard_cc", sigma=sigma, cross_encoder=ce, query=query,
                     passages=passages).indices.tolist()
        assert got == paper.dartboard_cc(E, q, qs, ps, 4, sigma)
    got = select(Instance(E, q, k=4, theta=0.5), "dartboard_hybrid", cross_encoder=ce, query=query,
                 passages=passages).indices.tolist()
    assert got == paper.dartboard_hybrid(E, q, qs, 4, 0.096)


def test_wrapping_and_errors(model_dir, tmp_path):
    from sentence_transformers import CrossEncoder

    model = CrossEncoder(str(model_dir), device="cpu", local_files_only=True)
    pairs = [("the cat", "the dog"), ("far", "big mat")]
    np.testing.assert_allclose(cross_encoder_scorer(model, cache=False)(pairs), raw_logits(model_dir, pairs),
                               rtol=1e-5, atol=1e-5)
    E, q = planted_duplicates(4, 3, 8, 2), unit_query(8, 2)
    with pytest.raises(TypeError, match="cross_encoder_scorer"):  # a bare CrossEncoder would apply its sigmoid
        select(Instance(E, q, k=3, theta=0.5), "knn_cc", cross_encoder=model, query="q", passages=texts(12, 0))
    with pytest.raises(TypeError, match="CrossEncoder"):
        cross_encoder_scorer(object())
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_cross_encoder(tmp_path / "missing")
    with pytest.raises(ValueError, match="config.json"):
        load_cross_encoder(tmp_path)
    with pytest.raises(ValueError, match="batch_size"):
        load_cross_encoder(model_dir, batch_size=0)
