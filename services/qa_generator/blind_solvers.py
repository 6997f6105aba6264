"""The blind solvers: each reads only what a model could read without looking (the question,
the option labels, their letters and their structure) plus, for the trained ones, the golds of
*other* units' rows (the gate passes those as ``train``, a fold left out at a time).

Trained on the other units:

- ``letter_prior``: the gold letter most frequent elsewhere in the task;
- ``label_prior``: the gold label (or count) most frequent elsewhere, per task and difficulty;
- ``rank_prior``: among all-numeric options, the rank (smallest, second-smallest, ...) most
  often the gold elsewhere;
- ``text_model``: a logistic regression over question and option n-grams, question words
  crossed with option words, and the option-structure features below;
- ``structure_model``: the same over the option-structure features alone (fewer weights: it
  learns a structural habit from fewer rows);
- ``memory``: the answer another unit gave to the same question (same text, or the same fact
  key): a fact asked in several units is answered from the others;
- ``neighbour``: the gold label of the most similar question of another unit.

Rules that learn nothing (and may abstain where they do not apply): ``longest``, ``shortest``,
``odd_form`` (the one option whose first word differs), ``overlap`` (the one option sharing most
words with the question), ``central`` (the one option sharing words with most other options,
a neighbourhood's centre) and, for multi-select rows, ``most_specific`` (the option naming the
most other options' types, plus those). A rule that scores *below* chance is a leak too: avoiding its pick
beats chance, which is what filtering rows on a rule's answer produces.

:mod:`services.qa_generator.gate` fits them unit-out and tests their scores.
"""

from __future__ import annotations

import functools
import itertools
import math
import re
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from skyqa.families import Item
from skyqa.families.options import STOP

# scikit-learn is imported where the models use it: it holds much of the ~150 MB the gate
# needs, which the qa-generator would otherwise carry from start while it waits for missions.

WORD = re.compile(r"[a-z0-9]+")
NUMBER = re.compile(r"^\s*-?\d+(?:\.\d+)?\s*$")
NEGATION = frozenset({"no", "not", "none", "nothing", "never", "neither"})
NEIGHBOUR_MIN = 0.5  # cosine similarity below which two questions are not neighbours
K = TypeVar("K", str, int)

Prediction = frozenset[str]
# fitted on the first list (other units), answers each item of the second; None: abstains
Solver = Callable[[list[Item], list[Item]], list[Prediction | None]]


def _each(rule: Callable[[list[Item], Item], Prediction | None]) -> Solver:
    return lambda train, items: [rule(train, it) for it in items]


def _words(text: str) -> list[str]:
    return WORD.findall(text.lower())


def _content(text: str) -> set[str]:
    return {w for w in _words(text) if w not in STOP}


def question(it: Item) -> str:
    """The question without its option lines (the prompt lists the options after it)."""
    return it.prompt.split("\nOptions:", 1)[0]


def _norm(text: str) -> str:
    return " ".join(_words(text))


def _mode(counter: Counter[K]) -> K | None:
    """The most frequent key, the smallest on ties; None when empty."""
    return min(counter, key=lambda k: (-counter[k], k)) if counter else None


def _size(train: list[Item]) -> int:
    size = _mode(Counter(len(t.gold) for t in train))
    return 1 if size is None else size


def _gold_labels(t: Item) -> list[str]:
    return [lab for oid, lab in t.options if oid in t.gold]


def _pick(item: Item, oid: str | None) -> Prediction | None:
    return None if oid is None else frozenset([oid])


def _by_label(item: Item, label: str | None) -> Prediction | None:
    hits = [oid for oid, lab in item.options if label is not None and lab.lower() == label.lower()]
    return frozenset(hits[:1]) if hits else None


# -- priors --------------------------------------------------------------------------------


def letter_prior(train: list[Item], item: Item) -> Prediction | None:
    if item.kind == "count":
        return None
    freq = Counter(g for t in train for g in t.gold)
    ranked = sorted((oid for oid, _ in item.options), key=lambda x: (-freq.get(x, 0), x))
    return frozenset(ranked[: _size(train) if item.kind == "multi" else 1])


def label_prior(train: list[Item], item: Item) -> Prediction | None:
    same = [t for t in train if t.difficulty == item.difficulty] or train
    if item.kind == "count":
        best = _mode(Counter(g for t in same for g in t.gold))
        return frozenset([best]) if best is not None else None
    freq = Counter(lab for t in same for lab in _gold_labels(t))
    ranked = sorted(item.options, key=lambda o: (-freq.get(o[1], 0), o[0]))
    return frozenset(oid for oid, _ in ranked[: _size(same) if item.kind == "multi" else 1])


def numeric_ranks(item: Item) -> list[int] | None:
    """Each option's rank among the options' values (0: smallest), or None unless every label
    is a number (a count offered as options)."""
    if item.kind != "choice" or not item.options or not all(NUMBER.match(lab) for _, lab in item.options):
        return None
    values = [float(lab) for _, lab in item.options]
    order = sorted(range(len(values)), key=lambda i: (values[i], i))
    ranks = [0] * len(values)
    for r, i in enumerate(order):
        ranks[i] = r
    return ranks


def rank_prior(train: list[Item], item: Item) -> Prediction | None:
    ranks = numeric_ranks(item)
    if ranks is None:
        return None
    seen: Counter[int] = Counter()
    for t in train:
        tr = numeric_ranks(t)
        if tr is not None:
            seen.update(tr[i] for i, (oid, _) in enumerate(t.options) if oid in t.gold)
    best = _mode(seen)
    if best is None or best not in ranks:
        return None
    return _pick(item, item.options[ranks.index(best)][0])


# -- option structure ------------------------------------------------------------------------


def _unique_max(values: Sequence[float]) -> int | None:
    top = max(values)
    hits = [i for i, v in enumerate(values) if v == top]
    return hits[0] if len(hits) == 1 and len(values) > 1 else None


def _sharing(item: Item) -> list[int]:
    """Per option, how many other options share a content word with it."""
    words = [_content(lab) for _, lab in item.options]
    return [sum(1 for j, w in enumerate(words) if j != i and words[i] & w) for i in range(len(words))]


def _overlap(item: Item) -> list[float]:
    asked = _content(question(item))
    out = []
    for _, lab in item.options:
        words = _content(lab)
        out.append(len(words & asked) / max(1, len(words)))
    return out


def _firsts(item: Item) -> list[str]:
    return [(_words(lab) or [""])[0] for _, lab in item.options]


@functools.lru_cache(maxsize=65536)  # every fold of every solver reads it again
def structure(item: Item) -> list[dict[str, float]]:
    """One feature dict per option: what its form says about it among the row's options,
    never its words (those are the text model's). Callers must not change the dicts."""
    labels = [lab for _, lab in item.options]
    lengths = [len(lab) for lab in labels]
    mean = sum(lengths) / len(lengths)
    spread = math.sqrt(sum((x - mean) ** 2 for x in lengths) / len(lengths)) or 1.0
    by_length = sorted(range(len(labels)), key=lambda i: (lengths[i], i))
    firsts = Counter(_firsts(item))
    sharing = _sharing(item)
    overlap = _overlap(item)
    ranks = numeric_ranks(item)
    mentions = _mentions(item)
    k = len(labels)
    out = []
    for i, label in enumerate(labels):
        words = _words(label)
        first = words[0] if words else ""
        f: dict[str, float] = {
            "length_z": (lengths[i] - mean) / spread,
            "length_rank": by_length.index(i) / max(1, k - 1),
            "longest": float(lengths[i] == max(lengths) and lengths.count(max(lengths)) == 1),
            "shortest": float(lengths[i] == min(lengths) and lengths.count(min(lengths)) == 1),
            "n_words": len(words) / 10,
            "odd_first_word": float(firsts[first] == 1 and len(firsts) == 2),
            "first_word_share": firsts[first] / k,
            "question_overlap": overlap[i],
            "most_overlap": float(_unique_max(overlap) == i),
            "sharing": sharing[i] / max(1, k - 1),
            "most_sharing": float(_unique_max([float(s) for s in sharing]) == i),
            "negation": float(bool(NEGATION & set(words))),
            "mentions": float(len(mentions[item.options[i][0]])),
            "mentioned": float(sum(item.options[i][0] in m for m in mentions.values())),
        }
        if ranks is not None:
            f[f"rank={ranks[i]}"] = 1.0
            f["rank_share"] = ranks[i] / max(1, k - 1)
            f["extreme"] = float(ranks[i] in (0, k - 1))
        out.append(f)
    return out


def _type_word(label: str) -> str:
    words = _words(label)
    return words[0] if words and words[0] != "a" else (words[1] if len(words) > 1 else "")


def _mentions(item: Item) -> dict[str, set[str]]:
    """Option id -> ids of the other options whose type word (first word) it contains."""
    words = {oid: set(_words(lab)) for oid, lab in item.options}
    types = {oid: _type_word(lab) for oid, lab in item.options}
    return {
        oid: {other for other, t in types.items() if other != oid and t and t in words[oid]}
        for oid, _ in item.options
    }


def most_specific(train: list[Item], item: Item) -> Prediction | None:
    if item.kind != "multi":
        return None
    mentions = _mentions(item)
    best = max(item.options, key=lambda o: (len(mentions[o[0]]), len(o[1]), o[0]))[0]
    return frozenset({best, *mentions[best]})


# -- rules: they learn nothing and abstain where they do not apply ---------------------------


def _rule(score: Callable[[Item], list[float] | None]) -> Solver:
    def solve(train: list[Item], items: list[Item]) -> list[Prediction | None]:
        out: list[Prediction | None] = []
        for it in items:
            values = score(it) if it.kind == "choice" and len(it.options) >= 3 else None
            best = _unique_max(values) if values else None
            out.append(None if best is None else frozenset([it.options[best][0]]))
        return out

    return solve


def _worded(it: Item) -> bool:
    return numeric_ranks(it) is None


RULES: dict[str, Solver] = {
    "longest": _rule(lambda it: [float(len(lab)) for _, lab in it.options] if _worded(it) else None),
    "shortest": _rule(lambda it: [-float(len(lab)) for _, lab in it.options] if _worded(it) else None),
    "odd_form": _rule(
        lambda it: [float(f) for f in (s["odd_first_word"] for s in structure(it))] if _worded(it) else None
    ),
    "overlap": _rule(_overlap),
    "central": _rule(lambda it: [float(s) for s in _sharing(it)]),
    "most_specific": _each(most_specific),
}


# -- memory and neighbours -------------------------------------------------------------------


def memory(train: list[Item], items: list[Item]) -> list[Prediction | None]:
    """The gold another unit's row gave to the same question (its text, or its fact key)."""
    golds: dict[str, Counter[str]] = {}
    for t in train:
        for key in (f"q:{_norm(question(t))}", f"f:{t.fact}" if t.fact else ""):
            if key:
                golds.setdefault(key, Counter()).update(_gold_labels(t) if t.kind != "count" else t.gold)
    out: list[Prediction | None] = []
    for it in items:
        seen = golds.get(f"f:{it.fact}") if it.fact else None
        seen = seen or golds.get(f"q:{_norm(question(it))}")
        label = _mode(seen) if seen else None
        if it.kind == "count":
            out.append(frozenset([label]) if label is not None else None)
        else:
            out.append(_by_label(it, label))
    return out


def neighbour(train: list[Item], items: list[Item]) -> list[Prediction | None]:
    """The gold label of the most similar question elsewhere (TF-IDF over word n-grams),
    where one is similar enough; abstains otherwise."""
    if not train or not items:
        return [None] * len(items)
    from sklearn.feature_extraction.text import TfidfVectorizer

    vec = TfidfVectorizer(ngram_range=(1, 2), token_pattern=r"[a-z0-9]+")  # nosec B106: a word pattern
    try:
        known = vec.fit_transform([question(t).lower() for t in train])
    except ValueError:  # no word at all
        return [None] * len(items)
    asked = vec.transform([question(it).lower() for it in items])
    sims = (asked @ known.T).toarray()
    out: list[Prediction | None] = []
    for i, it in enumerate(items):
        j = int(sims[i].argmax())
        if sims[i, j] < NEIGHBOUR_MIN:
            out.append(None)
            continue
        t = train[j]
        if it.kind == "count":
            out.append(frozenset(t.gold))
        else:
            labels = _gold_labels(t)
            out.append(_by_label(it, labels[0] if labels else None))
    return out


# -- linear models ---------------------------------------------------------------------------


def _ngrams(text: str) -> list[str]:
    words = _words(text)
    return words + [f"{a}_{b}" for a, b in itertools.pairwise(words)]


@functools.lru_cache(maxsize=65536)
def _text_features(item: Item) -> list[dict[str, float]]:
    asked = _content(question(item))
    out = []
    for (oid, label), shape in zip(item.options, structure(item), strict=True):
        f = dict(shape)
        f[f"letter={oid}"] = 1.0
        f[f"label={label.lower()}"] = 1.0
        for g in _ngrams(label):
            f[f"o={g}"] = 1.0
        for w in asked:
            for v in _content(label) or {label.lower()}:
                f[f"x={w}|{v}"] = 1.0
        out.append(f)
    return out


def _matrix(rows: Sequence[dict[str, float]], vocab: dict[str, int], grow: bool) -> Any:
    """Feature dicts as a sparse matrix over ``vocab`` (grown with unseen names when ``grow``;
    otherwise they are left out), with the 32-bit indices liblinear needs. sklearn's
    DictVectorizer does the same at several times the cost, paid for every fold."""
    from scipy.sparse import csr_matrix

    indptr, indices, data = [0], [], []
    for f in rows:
        for name, value in f.items():
            j = vocab.get(name)
            if j is None:
                if not grow:
                    continue
                j = vocab[name] = len(vocab)
            indices.append(j)
            data.append(value)
        indptr.append(len(indices))
    shape = (len(rows), max(1, len(vocab)))
    return csr_matrix((data, indices, indptr), shape=shape, dtype="float64")


def _fit(xs: Sequence[dict[str, float]], ys: Sequence[Any]) -> tuple[Any, dict[str, int]]:
    from sklearn.linear_model import LogisticRegression

    vocab: dict[str, int] = {}
    # liblinear is fast on a few hundred rows but two-class only (counts have more)
    solver = "liblinear" if len(set(ys)) <= 2 else "lbfgs"
    model = LogisticRegression(C=1.0, solver=solver, max_iter=1000)
    model.fit(_matrix(xs, vocab, grow=True), ys)
    return model, vocab


def _fit_options(
    train: list[Item], items: list[Item], features: Callable[[Item], list[dict[str, float]]]
) -> list[Prediction | None]:
    """Per-option logistic regression: the option scored most likely gold (multi-select: those
    above one half, at least one)."""
    xs, ys = [], []
    for t in train:
        xs += features(t)
        ys += [int(oid in t.gold) for oid, _ in t.options]
    if len(set(ys)) < 2:
        return [None] * len(items)
    model, vocab = _fit(xs, ys)
    held = [f for item in items for f in features(item)]
    every = model.predict_proba(_matrix(held, vocab, grow=False))[:, 1] if held else []
    out: list[Prediction | None] = []
    at = 0
    for item in items:
        scores = every[at : at + len(item.options)]
        at += len(item.options)
        order = sorted(range(len(item.options)), key=lambda i: (-scores[i], item.options[i][0]))
        if item.kind == "choice":
            out.append(frozenset([item.options[order[0]][0]]))
        else:
            picked = {item.options[i][0] for i in order if scores[i] > 0.5}
            out.append(frozenset(picked or {item.options[order[0]][0]}))
    return out


def text_model(train: list[Item], items: list[Item]) -> list[Prediction | None]:
    """Question and option n-grams, their crossings and the option structure; counts are
    predicted from the question's words alone."""
    if items and items[0].kind == "count":
        return _count_model(train, items)
    return _fit_options(train, items, _text_features)


def structure_model(train: list[Item], items: list[Item]) -> list[Prediction | None]:
    if items and items[0].kind == "count":
        return [None] * len(items)
    return _fit_options(train, items, structure)


def _count_model(train: list[Item], items: list[Item]) -> list[Prediction | None]:
    labels = [next(iter(t.gold)) for t in train]
    if len(set(labels)) < 2:
        return [frozenset(labels[:1]) if labels else None for _ in items]

    def feats(it: Item) -> dict[str, float]:
        return {f"p={g}": 1.0 for g in _ngrams(question(it))}

    model, vocab = _fit([feats(t) for t in train], labels)
    predicted = model.predict(_matrix([feats(it) for it in items], vocab, grow=False))
    return [frozenset([str(p)]) for p in predicted]


TRAINED: dict[str, Solver] = {
    "letter_prior": _each(letter_prior),
    "label_prior": _each(label_prior),
    "rank_prior": _each(rank_prior),
    "text_model": text_model,
    "structure_model": structure_model,
    "memory": memory,
    "neighbour": neighbour,
}
SOLVERS: dict[str, Solver] = {**TRAINED, **RULES}
# what a draw's assignment of golds and letters decides (and a fresh draw assigns anew), rather
# than how the family words and builds its rows
BALANCE = frozenset({"letter_prior", "label_prior", "rank_prior"})


def forget() -> None:
    """Drop the memos of option features: they hold every item seen, which a long-lived
    qa-generator must not keep from one release to the next."""
    structure.cache_clear()
    _text_features.cache_clear()


FEATURES = {
    "letter_prior": "answer position (gold letter)",
    "label_prior": "gold label distribution",
    "rank_prior": "the gold's rank among numeric options",
    "text_model": "question and option wording",
    "structure_model": "option structure (length, form, overlap with the question, neighbourhood, rank)",
    "memory": "a fact answered in another unit",
    "neighbour": "the answer of a similar question in another unit",
    "most_specific": "option structure (the gold option names the others)",
    "longest": "option length (the longest)",
    "shortest": "option length (the shortest)",
    "odd_form": "option form (the one option worded differently)",
    "overlap": "options repeating the question's words",
    "central": "option neighbourhood (the option the others share words with)",
}
