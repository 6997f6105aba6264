"""The blind solvers: every one reads only what a model could read without looking (the prompt,
the option labels, their letters and their structure, and the gold answers of *other*
landmarks' rows, which the gate passes as ``train``):

- ``letter_prior``: the gold letter most frequent elsewhere in the task;
- ``label_prior``: the gold label (or count) most frequent elsewhere, per task and difficulty;
- ``text_model``: a logistic regression over option text, letter, length, option structure and
  prompt words crossed with the option, trained on the other landmarks' rows;
- ``most_specific`` (multi-select rows): the option that names the most other options' types,
  plus the options it names.

:mod:`services.qa_generator.gate` fits them landmark-out and tests their scores.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from typing import TypeVar

from skyqa.families import Item

# scikit-learn is imported where the text model uses it: it holds much of the ~150 MB the gate
# needs, which the qa-generator would otherwise carry from start while it waits for missions.

WORD = re.compile(r"[a-z]+")
K = TypeVar("K", str, int)


Prediction = frozenset[str]
# fitted on the first list (other landmarks), answers each item of the second
Solver = Callable[[list[Item], list[Item]], list[Prediction | None]]


def _each(rule: Callable[[list[Item], Item], Prediction | None]) -> Solver:
    return lambda train, items: [rule(train, it) for it in items]


def _words(text: str) -> list[str]:
    return WORD.findall(text.lower())


def _mode(counter: Counter[K]) -> K | None:
    """The most frequent key, the smallest on ties; None when empty."""
    return min(counter, key=lambda k: (-counter[k], k)) if counter else None


def _size(train: list[Item]) -> int:
    size = _mode(Counter(len(t.gold) for t in train))
    return 1 if size is None else size


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
    freq = Counter(lab for t in same for oid, lab in t.options if oid in t.gold)
    ranked = sorted(item.options, key=lambda o: (-freq.get(o[1], 0), o[0]))
    return frozenset(oid for oid, _ in ranked[: _size(same) if item.kind == "multi" else 1])


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


def _option_features(item: Item) -> list[dict[str, float]]:
    """One feature dict per option of ``item``."""
    prompt = set(_words(item.prompt))
    mentions = _mentions(item)
    longest = max(len(lab) for _, lab in item.options)
    out = []
    for oid, label in item.options:
        words = _words(label)
        f: dict[str, float] = {
            f"label={label.lower()}": 1.0,
            f"letter={oid}": 1.0,
            "n_words": len(words) / 10,
            "longest": float(len(label) == longest),
            "mentions": float(len(mentions[oid])),
            "mentioned": float(sum(oid in m for m in mentions.values())),
            "in_prompt": sum(w in prompt for w in words) / max(1, len(words)),
        }
        for w in words:
            f[f"w={w}"] = 1.0
        for w in prompt:
            f[f"p={w}|label={label.lower()}"] = 1.0
        out.append(f)
    return out


def text_model(train: list[Item], items: list[Item]) -> list[Prediction | None]:
    """Per-option logistic regression; counts are predicted from prompt words alone."""
    if items and items[0].kind == "count":
        return _count_model(train, items)
    xs, ys = [], []
    for t in train:
        xs += _option_features(t)
        ys += [int(oid in t.gold) for oid, _ in t.options]
    if len(set(ys)) < 2:
        return [None] * len(items)
    from sklearn.feature_extraction import DictVectorizer
    from sklearn.linear_model import LogisticRegression

    vec = DictVectorizer()
    model = LogisticRegression(C=1.0, max_iter=2000)
    model.fit(vec.fit_transform(xs), ys)
    out: list[Prediction | None] = []
    for item in items:
        feats = vec.transform(_option_features(item))
        scores = model.predict_proba(feats)[:, 1]
        order = sorted(range(len(item.options)), key=lambda i: (-scores[i], item.options[i][0]))
        if item.kind == "choice":
            out.append(frozenset([item.options[order[0]][0]]))
        else:
            picked = {item.options[i][0] for i in order if scores[i] > 0.5}
            out.append(frozenset(picked or {item.options[order[0]][0]}))
    return out


def _count_model(train: list[Item], items: list[Item]) -> list[Prediction | None]:
    labels = [next(iter(t.gold)) for t in train]
    if len(set(labels)) < 2:
        return [frozenset(labels[:1]) if labels else None for _ in items]
    from sklearn.feature_extraction import DictVectorizer
    from sklearn.linear_model import LogisticRegression

    vec = DictVectorizer()
    model = LogisticRegression(C=1.0, max_iter=2000)
    model.fit(vec.fit_transform([{f"p={w}": 1.0 for w in _words(t.prompt)} for t in train]), labels)
    predicted = model.predict(vec.transform([{f"p={w}": 1.0 for w in _words(it.prompt)} for it in items]))
    return [frozenset([str(p)]) for p in predicted]


SOLVERS: dict[str, Solver] = {
    "letter_prior": _each(letter_prior),
    "label_prior": _each(label_prior),
    "text_model": text_model,
    "most_specific": _each(most_specific),
}
