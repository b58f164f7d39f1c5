"""LangChain faces of the RAG-adapter fakes (tests/helpers/integration_fakes.py) and the truth the
LangChain tests compare with: cosine by numpy, top fetch_k, then divopt's select()."""
import numpy as np
from langchain_core.embeddings import Embeddings
from langchain_core.vectorstores import InMemoryVectorStore

from divopt_rag.models import Instance
from divopt_rag.solvers import select

from helpers.integration_fakes import corpus, cosine, hash_embed


class HashEmbedding(Embeddings):
    """LangChain face of the deterministic fake embedding (tests/helpers/integration_fakes.py); counts
    the documents it embeds (``documents_embedded``), so a test can tell re-embedding apart."""

    def __init__(self):
        self.documents_embedded = 0

    def embed_documents(self, texts):
        self.documents_embedded += len(texts)
        return [hash_embed(t) for t in texts]

    def embed_query(self, text):
        return hash_embed(text)


def make_store(seed=0):
    texts, meta = corpus(seed)
    store = InMemoryVectorStore(embedding=HashEmbedding())
    store.add_texts(texts, metadatas=meta, ids=[f"id{i}" for i in range(len(texts))])
    return store, texts, meta


def expected_texts(texts, query, fetch_k, k, method, theta, keep=None, order="selection"):
    """Truth written here: cosine by numpy over the whole corpus, top fetch_k, then select()."""
    emb = HashEmbedding()
    rows = [i for i in range(len(texts)) if keep is None or keep(i)]
    E = np.asarray(emb.embed_documents([texts[i] for i in rows]))
    q = np.asarray(emb.embed_query(query))
    cos = cosine(E, q)
    top = np.argsort(-cos)[:fetch_k]
    assert len(np.unique(np.round(cos[top], 12))) == len(top), "ties would make the fetch order ambiguous"
    sel = select(Instance(E[top], q, k=min(k, len(top)), theta=theta, normalize=True), method).indices
    if order == "relevance":
        sel = sel[np.argsort(-cos[top][sel], kind="stable")]
    return [texts[rows[top[i]]] for i in sel], cos[top][sel]
