"""Seeded synthetic tool libraries and gold-labelled queries for the retrieval benchmark and tests.

A library mixes primitives from five domains (arithmetic, lists, strings, dates, finance, tables)
with composites layered over them up to depth 4. Each primitive is a *concept* (e.g. "weighted
mean") specialised to an *entity* (e.g. "sensor readings") and a constant, so its code, id,
name and description are distinct; composites chain two or three tools of the same entity with
type-correct calls. Every tool has a signature (from its annotations), a multi-sentence
description, pre/post-conditions where they make sense, a complexity note and worked examples
whose values were computed by running the same arithmetic here (examples are *not* executed in
the sandbox on load: :func:`build_snapshot` uses ``verify_examples=False``).

Queries name the entity and ask for the concept in other words (each concept has its own question
phrasings, written apart from its description), and carry values of the gold tool's parameter
types in their text, the way a word problem does.

Bulk path: :func:`library_json` writes the library in the ``cocoda_jax.library/1`` format (no digests, so
the loader re-derives every tool from its source) and
:func:`build_snapshot` loads it with :meth:`LibrarySnapshot.from_json` (the public API: every tool
is re-parsed, its edges re-derived and re-inserted through INSERTTOOL's static checks).
"""

from __future__ import annotations

import dataclasses
import json
import math
import random
from typing import Any

SCHEMA = "cocoda_jax.library/1"


@dataclasses.dataclass(frozen=True)
class Concept:
    key: str
    domain: str
    params: tuple[tuple[str, str], ...]   # (name, type text)
    result: str
    body: str                            # uses params and the constant C
    desc: str                            # description template ({e} entity, {c} constant)
    asks: tuple[str, ...]                # question templates ({e} entity, {v} values text)
    pre: tuple[str, ...] = ()
    post: tuple[str, ...] = ()
    complexity: str = "O(1)"
    example: tuple = ()                  # example argument values


F, I, S, LF, LS, T = "float", "int", "str", "list[float]", "list[str]", "Table"

CONCEPTS: tuple[Concept, ...] = (
    # arithmetic
    Concept("scaled_sum", "arithmetic", (("a", F), ("b", F)), F, "return (a + b) * C",
            "Add two {e} amounts and scale the total by {c}. Both inputs may be negative.",
            ("What do {e} {v} come to together, times the usual factor?", "Combine {e} {v} into one figure."),
            example=(2.0, 3.0)),
    Concept("ratio", "arithmetic", (("a", F), ("b", F)), F, "return a / b * C",
            "Divide one {e} quantity by another and multiply by {c}. The divisor must be nonzero.",
            ("How many times does {e} {v} fit, as a rate?", "Express {e} {v} as a proportion."),
            pre=("b != 0",), example=(9.0, 3.0)),
    Concept("difference_pct", "arithmetic", (("old", F), ("new", F)), F, "return (new - old) / old * 100.0 + C - C",
            "Relative change between an old and a new {e} value in percent. Old must be nonzero.",
            ("By what percentage did {e} move from {v}?", "Growth of {e} going {v}, as a percentage?"),
            pre=("old != 0",), example=(50.0, 60.0)),
    Concept("clamp_value", "arithmetic", (("x", F),), F, "return min(max(x, -C), C)",
            "Limit a {e} value to the closed interval from minus {c} to {c}.",
            ("Keep {e} {v} within the allowed band.", "Cap {e} {v} so it never leaves the safe range."),
            post=("abs(result) <= abs(x) or abs(result) <= 1e9",), example=(5.0,)),
    Concept("round_digits", "arithmetic", (("x", F), ("digits", I)), F, "return round(x * C, digits) / C",
            "Round a {e} value to a given number of decimal digits after scaling by {c}.",
            ("Give {e} {v} to that many decimals.", "Tidy {e} {v} to fewer decimal places."),
            pre=("digits >= 0",), example=(2.3456, 2)),
    # lists
    Concept("mean_of", "lists", (("xs", LF),), F, "return sum(xs) / len(xs) * C",
            "Arithmetic mean of a list of {e}, multiplied by {c}. The list must not be empty.",
            ("On average, what are {e} {v}?", "Typical level of {e} {v}?"),
            pre=("len(xs) > 0",), complexity="O(n)", example=([1.0, 2.0, 3.0],)),
    Concept("spread_of", "lists", (("xs", LF),), F, "return (max(xs) - min(xs)) * C",
            "Range of a list of {e}: largest minus smallest, scaled by {c}. Needs at least one element.",
            ("How far apart are the extreme {e} among {v}?", "Gap between highest and lowest {e} {v}?"),
            pre=("len(xs) > 0",), post=("result >= 0 or C < 0",), complexity="O(n)", example=([4.0, 1.0, 7.0],)),
    Concept("top_values", "lists", (("xs", LF), ("k", I)), LF, "return sorted(xs, reverse=True)[:k] + [C][:0]",
            "The k largest {e} of a list in descending order.",
            ("Which {e} are biggest in {v}?", "Pick the leading {e} from {v}."),
            pre=("k >= 0",), complexity="O(n log n)", example=([3.0, 9.0, 1.0], 2)),
    Concept("count_above", "lists", (("xs", LF), ("threshold", F)), I, "return sum(1 for x in xs if x > threshold * C)",
            "Count the {e} strictly greater than a threshold scaled by {c}.",
            ("How many {e} in {v} exceed the cutoff?", "Number of {e} over the limit in {v}?"),
            post=("0 <= result <= len(xs)",), complexity="O(n)", example=([1.0, 5.0, 8.0], 4.0)),
    Concept("running_total", "lists", (("xs", LF),), LF,
            "out = []\n    acc = 0.0\n    for x in xs:\n        acc += x * C\n        out.append(acc)\n    return out",
            "Cumulative sums of a list of {e}, each term scaled by {c}.",
            ("Show the accumulated {e} step by step for {v}.", "Build the prefix totals of {e} {v}."),
            post=("len(result) == len(xs)",), complexity="O(n)", example=([1.0, 2.0, 3.0],)),
    Concept("median_of", "lists", (("xs", LF),), F,
            "ys = sorted(xs)\n    n = len(ys)\n    return (ys[n // 2] if n % 2 else (ys[n // 2 - 1] + ys[n // 2]) / 2) * C",
            "Median of a list of {e} (mean of the two middle values for even length), times {c}.",
            ("What is the middle {e} of {v}?", "Find the midpoint {e} in sorted order for {v}."),
            pre=("len(xs) > 0",), complexity="O(n log n)", example=([5.0, 1.0, 3.0],)),
    # strings
    Concept("count_word", "strings", (("text", S), ("word", S)), I, "return text.lower().split().count(word.lower()) * C",
            "Count case-insensitive occurrences of a word in a {e} text, times {c}.",
            ("How often does the term show up in the {e} {v}?", "Frequency of that token within {e} {v}?"),
            post=("result >= 0",), complexity="O(n)", example=("a b a", "a")),
    Concept("slugify", "strings", (("text", S),), S, "return '-'.join(text.lower().split())[:C]",
            "Turn a {e} title into a lowercase hyphenated slug cut to {c} characters.",
            ("Make a URL-friendly handle from the {e} {v}.", "Produce the dashed lowercase key of {e} {v}."),
            post=("len(result) <= len(text)",), complexity="O(n)", example=("Hello World",)),
    Concept("initials", "strings", (("name", S),), S, "return ''.join(w[0].upper() for w in name.split())[:C]",
            "Upper-case initials of each word of a {e} name, at most {c} letters.",
            ("Abbreviate the {e} {v} to its leading letters.", "What monogram do the {e} {v} give?"),
            complexity="O(n)", example=("ada love lace",)),
    Concept("split_words", "strings", (("text", S),), LS, "return text.split()[:C]",
            "Split a {e} text on whitespace into at most {c} tokens.",
            ("Break the {e} {v} into separate pieces.", "List the tokens that make up {e} {v}."),
            complexity="O(n)", example=("x y z",)),
    Concept("join_words", "strings", (("words", LS), ("sep", S)), S, "return sep.join(words[:C])",
            "Join at most {c} {e} tokens with a separator.",
            ("Glue the {e} {v} back into one string.", "Concatenate {e} {v} with the delimiter."),
            complexity="O(n)", example=(["a", "b"], "-")),
    # dates (ISO strings)
    Concept("add_days", "dates", (("date", S), ("days", I)), S,
            "y, m, d = (int(p) for p in date.split('-'))\n    d2 = min(28, d + days * C)\n    return f'{y:04d}-{m:02d}-{d2:02d}'",
            "Shift an ISO {e} date forward by a number of days times {c}, clipped to the 28th.",
            ("Which calendar day comes after waiting from the {e} {v}?", "When is the {e} deadline counting from {v}?"),
            pre=("days >= 0",), example=("2024-01-05", 3)),
    Concept("days_between", "dates", (("start", S), ("end", S)), I,
            "a = [int(p) for p in start.split('-')]\n    b = [int(p) for p in end.split('-')]\n"
            "    return ((b[0] - a[0]) * 365 + (b[1] - a[1]) * 30 + b[2] - a[2]) * C",
            "Approximate number of days between two ISO {e} dates (30-day months), times {c}.",
            ("How long elapsed for the {e} between {v}?", "Span in days of the {e} from {v}?"),
            example=("2024-01-01", "2024-02-01")),
    Concept("year_of", "dates", (("date", S),), I, "return int(date.split('-')[0]) + C - C",
            "Calendar year of an ISO {e} date.",
            ("In which year did the {e} {v} happen?", "Extract the annum of {e} {v}."),
            example=("2023-06-01",)),
    # finance
    Concept("compound_growth", "finance", (("principal", F), ("rate", F), ("years", I)), F,
            "return principal * (1 + rate / C) ** years",
            "Value of a {e} principal compounding at a yearly rate over whole years, rate given per {c}.",
            ("What will the {e} {v} be worth after the holding period?", "Future worth of {e} {v} with reinvested gains?"),
            pre=("years >= 0", "principal >= 0"), post=("result >= 0",), example=(100.0, 5.0, 2)),
    Concept("simple_interest", "finance", (("principal", F), ("rate", F), ("years", F)), F,
            "return principal * rate / C * years",
            "Simple interest earned on a {e} principal at a rate per {c} for a period in years.",
            ("How much does the {e} {v} earn without compounding?", "Plain yield on {e} {v}?"),
            pre=("years >= 0",), example=(1000.0, 5.0, 2.0)),
    Concept("net_present_value", "finance", (("flows", LF), ("rate", F)), F,
            "return sum(f / (1 + rate / C) ** t for t, f in enumerate(flows))",
            "Net present value of a list of {e} cash flows discounted at a rate per {c}.",
            ("What are the {e} {v} worth today after discounting?", "Today's equivalent of the {e} stream {v}?"),
            pre=("rate > -100",), complexity="O(n)", example=([-100.0, 60.0, 60.0], 10.0)),
    Concept("margin_pct", "finance", (("revenue", F), ("cost", F)), F, "return (revenue - cost) / revenue * C",
            "Profit margin of {e}: revenue minus cost over revenue, times {c}. Revenue must be nonzero.",
            ("What share of the {e} {v} is kept as profit?", "How profitable were {e} {v}?"),
            pre=("revenue != 0",), example=(200.0, 150.0)),
    # tables
    Concept("column_total", "tables", (("table", T), ("col", S)), F,
            "return sum(float(r[col]) for r in table['rows']) * C",
            "Sum of a numeric column over every row of a {e} table, times {c}.",
            ("Add up that field over the {e} records {v}.", "Grand total of the {e} column {v}?"),
            complexity="O(rows)", example=({"rows": [{"q": 1}, {"q": 2}]}, "q")),
    Concept("filter_rows", "tables", (("table", T), ("col", S), ("value", S)), T,
            "return {'rows': [r for r in table['rows'] if str(r[col]) == value][:C]}",
            "Keep the rows of a {e} table whose column equals a value, at most {c} rows.",
            ("Only the {e} entries matching {v}, please.", "Select the {e} records where the field is {v}."),
            complexity="O(rows)", example=({"rows": [{"c": "x"}, {"c": "y"}]}, "c", "x")),
    Concept("row_count", "tables", (("table", T),), I, "return len(table['rows']) * C",
            "Number of rows in a {e} table, times {c}.",
            ("How many {e} records are listed in {v}?", "Size of the {e} listing {v}?"),
            post=("result >= 0",), example=({"rows": [{"a": 1}]},)),
)

CONCEPTS_BY_KEY = {c.key: c for c in CONCEPTS}

ENTITIES = (
    "invoice", "sensor reading", "exam score", "shipment", "payroll", "rainfall", "ticket sale", "loan",
    "inventory", "patient visit", "server latency", "crop yield", "energy usage", "ad campaign", "rental",
    "warehouse order", "flight delay", "student grade", "stock trade", "subscription", "hotel booking",
    "tax filing", "donation", "water quality", "traffic count", "survey response", "bakery order",
    "fleet mileage", "museum visitor", "library loan", "solar output", "call center", "grant budget",
    "clinical trial", "freight cost", "parking fee", "lab assay", "wind speed", "restaurant bill", "tuition",
)

_QUALIFIERS = ("regional", "monthly", "weekly", "quarterly", "daily", "annual", "northern", "southern",
               "eastern", "western", "urban", "rural", "domestic", "international", "wholesale", "retail",
               "premium", "standard", "archived", "pending", "audited", "estimated", "projected", "actual")


def _slug(text: str) -> str:
    return "_".join(text.lower().replace("-", " ").split())


def _entities(n: int) -> list[str]:
    """``n`` distinct entity phrases: the base list, then qualifier + entity pairs, then triples."""
    out = list(ENTITIES)
    for q in _QUALIFIERS:
        out += [f"{q} {e}" for e in ENTITIES]
    for q1 in _QUALIFIERS:
        for q2 in _QUALIFIERS:
            if len(out) >= n:
                return out[:n]
            if q1 != q2:
                out += [f"{q1} {q2} {e}" for e in ENTITIES]
    return out[:n]


@dataclasses.dataclass(frozen=True)
class Spec:
    """A generated tool before it becomes a record."""

    name: str
    source: str
    description: str
    pre: tuple[str, ...]
    post: tuple[str, ...]
    complexity: str
    examples: tuple[tuple[dict, Any], ...]
    concept: str            # primitive concept key, or "composite"
    entity: str
    calls: tuple[str, ...]
    asks: tuple[str, ...]
    params: tuple[tuple[str, str], ...]
    result: str
    depth: int


def _run_body(concept: Concept, const: float, args: tuple) -> Any:
    """The example's expected value, computed by the same body (trusted: it is our own template)."""
    ns: dict[str, Any] = {}
    arglist = ", ".join(n for n, _ in concept.params)
    exec(f"def _f({arglist}):\n    C = {const!r}\n    {concept.body}\n", ns)  # noqa: S102 - generator's own code
    return ns["_f"](*args)


def _const(concept: Concept, variant: int) -> Any:
    """A constant unique per (concept, variant): equal code would be a duplicate (INSERTTOOL)."""
    if concept.key in ("slugify", "initials", "split_words", "join_words", "filter_rows", "add_days",
                       "days_between", "year_of", "row_count", "count_word", "top_values", "count_above"):
        return 1 + variant  # integral constants (lengths, counts)
    return round(1.0 + 0.01 * variant, 2)


def _primitive(concept: Concept, entity: str, variant: int, serial: int) -> Spec:
    const = _const(concept, serial)
    name = f"{concept.key}_{_slug(entity)}_v{variant}"
    params = ", ".join(f"{n}: {t}" for n, t in concept.params)
    body = concept.body.replace("C", repr(const))
    source = f"def {name}({params}) -> {concept.result}:\n    {body}\n"
    desc = concept.desc.format(e=entity, c=const)
    extra = f" Used for {entity} records; variant {variant}."
    examples = ()
    if concept.example:
        try:
            expected = _run_body(concept, const, concept.example)
            if not (isinstance(expected, float) and not math.isfinite(expected)):
                examples = ((dict(zip((n for n, _ in concept.params), concept.example)), expected),)
        except Exception:  # an example that does not compute is left out
            examples = ()
    pre = tuple(p for p in concept.pre)
    post = tuple(p.replace("C", repr(const)) for p in concept.post)
    return Spec(name, source, desc + extra, pre, post, concept.complexity, examples, concept.key, entity, (),
                concept.asks, concept.params, concept.result, 0)


def _composite(rng: random.Random, name: str, first: Spec, second: Spec, depth: int) -> Spec | None:
    """``second(first(...), rest of second's params)`` when first's result fits second's first param."""
    if not second.params or second.params[0][1] != first.result:
        return None
    params = list(first.params)
    names = {n for n, _ in params}
    rest = []
    for n, t in second.params[1:]:
        fresh, i = n, 2
        while fresh in names:
            fresh, i = f"{n}{i}", i + 1
        names.add(fresh)
        params.append((fresh, t))
        rest.append(fresh)
    sig = ", ".join(f"{n}: {t}" for n, t in params)
    inner = f"{first.name}({', '.join(n for n, _ in first.params)})"
    call = f"{second.name}({', '.join([inner] + rest)})"
    source = f"def {name}({sig}) -> {second.result}:\n    return {call}\n"
    d1 = first.description.split(".")[0].rstrip()
    d2 = second.description.split(".")[0].rstrip()
    desc = (f"{d1[0].upper()}{d1[1:]}, then apply: {d2[0].lower()}{d2[1:]}. "
            f"A macro over {first.name} and {second.name} for {first.entity} records.")
    asks = tuple(f"{a.rstrip('?.')} and then {b[0].lower()}{b[1:]}" for a, b in zip(first.asks, second.asks))
    return Spec(name, source, desc, first.pre, (), "composite of its calls", (),
                "composite", first.entity, (first.name, second.name), asks, tuple(params), second.result, depth)


def generate(size: int, seed: int = 0) -> list[Spec]:
    """``size`` tools (about 70% primitives, 30% composites of depth 1-4), deterministic in ``seed``."""
    if size < 1:
        raise ValueError(f"size must be >= 1, got {size}")
    rng = random.Random(seed)
    n_prim = max(1, min(size, int(round(size * 0.7))))
    per_entity = len(CONCEPTS)
    n_entities = max(1, math.ceil(n_prim / per_entity))
    entities = _entities(n_entities)
    specs: list[Spec] = []
    by_entity: dict[str, list[Spec]] = {}
    variant = 0
    while len(specs) < n_prim:
        for e_index, entity in enumerate(entities):
            for concept in CONCEPTS:
                if len(specs) >= n_prim:
                    break
                s = _primitive(concept, entity, variant, variant * len(entities) + e_index)
                specs.append(s)
                by_entity.setdefault(entity, []).append(s)
        variant += 1
    composites: list[Spec] = []
    pairs: set[tuple[str, str]] = set()
    attempts = 0
    while len(specs) + len(composites) < size and attempts < 50 * size:
        attempts += 1
        entity = rng.choice(entities)
        pool = by_entity[entity]
        first = rng.choice(pool)
        if first.depth >= 4:
            continue
        seconds = [s for s in pool if s.params and s.params[0][1] == first.result and s.depth == 0
                   and s.name != first.name]
        if not seconds:
            continue
        second = rng.choice(seconds)
        depth = max(first.depth, second.depth) + 1
        if (first.name, second.name) in pairs:
            continue
        c = _composite(rng, f"macro_{len(composites):06d}_{_slug(entity)}", first, second, depth)
        if c is None:
            continue
        pairs.add((first.name, second.name))
        composites.append(c)
        pool.append(c)
    return specs + composites


def library_json(specs: list[Spec], max_depth: int = 8) -> str:
    """The specs in the ``cocoda_jax.library/1`` format (derived fields filled from the generator)."""
    from cocoda_jax import values
    from cocoda_jax.library.analysis import analyse

    depth: dict[str, int] = {}
    flat: dict[str, int] = {}
    lines = []
    for s in sorted(specs, key=lambda s: (s.depth, s.name)):
        facts = analyse(s.source)
        calls = list(facts.calls)  # edges from the code, in execution order
        depth[s.name] = 1 + max(depth[c] for c in calls) if calls else 0
        flat[s.name] = sum(flat[c] for c in calls) if calls else 1
        entry = {
            "name": s.name, "source": s.source,
            "signature": "(" + ", ".join(f"{n}: {t}" for n, t in s.params) + f") -> {s.result}",
            "description": s.description, "pre": list(s.pre), "post": list(s.post), "complexity": s.complexity,
            "examples": [{"args": values.encode(a), "expected": values.encode(e)} for a, e in s.examples],
            "id": facts.code_id,
            "calls": calls, "depth": depth[s.name], "flat": flat[s.name],
        }
        lines.append(json.dumps(entry, sort_keys=True, ensure_ascii=True))
    return f'{{"max_depth": {max_depth}, "schema": "{SCHEMA}", "tools": [\n' + ",\n".join(lines) + "\n]}\n"


def build_snapshot(size: int, seed: int = 0, max_depth: int = 8):
    """A valid LibrarySnapshot of ``size`` generated tools, loaded through ``LibrarySnapshot.from_json``,
    plus the specs (for gold queries)."""
    from cocoda_jax.library import LibrarySnapshot

    specs = generate(size, seed)
    return LibrarySnapshot.from_json(library_json(specs, max_depth), verify_examples=False), specs


def with_distractors(base: Any, size: int, seed: int = 0):
    """``base`` (a LibrarySnapshot) grown to ``size`` tools with generated distractors (the tools of
    :func:`generate`: typed, described, composed, and mostly numeric like a math library's), through
    the same JSON load as any library. A name clash with ``base`` is an error."""
    import json as _json

    from cocoda_jax.library import LibrarySnapshot

    extra = size - len(base)
    if extra < 0:
        raise ValueError(f"the base library already has {len(base)} tools, more than size={size}")
    if extra == 0:
        return base
    doc = _json.loads(base.to_json())
    gen = _json.loads(library_json(generate(extra, seed), doc["max_depth"]))
    clash = {t["name"] for t in doc["tools"]} & {t["name"] for t in gen["tools"]}
    if clash:
        raise ValueError(f"distractor names clash with the base library: {sorted(clash)[:5]}")
    # the generator's entries carry no digests, so the merged file is the older format: every tool re-derived
    for entry in doc["tools"]:
        entry.pop("digest", None)
    doc["schema"], doc["tools"] = gen["schema"], doc["tools"] + gen["tools"]
    return LibrarySnapshot.from_json(_json.dumps(doc), verify_examples=False)


def specs_key(specs: list[Spec], max_depth: int = 8) -> str:
    """A content hash of the generated tools (what the loaded snapshot depends on)."""
    import hashlib

    h = hashlib.sha256(f"{SCHEMA}|{max_depth}".encode())
    for s in specs:
        h.update(repr((s.name, s.source, s.description, s.pre, s.post, s.complexity, s.examples)).encode())
    return h.hexdigest()[:20]


def cached_snapshot(size: int, seed: int = 0, cache_dir: str | None = None, max_depth: int = 8):
    """:func:`build_snapshot`, with the loaded snapshot pickled under ``cache_dir`` by content hash.

    ``LibrarySnapshot.from_json`` re-derives and re-checks every tool (about 1 ms per tool), so a
    benchmark repeated at 102,400 tools may build each size once and reload the pickle afterwards
    (only from a cache directory the user trusts: unpickling runs code). Returns
    ``(snapshot, specs, seconds_to_build_or_load, loaded_from_cache)``.
    """
    import os
    import pickle
    import time

    specs = generate(size, seed)
    t0 = time.perf_counter()
    path = None
    if cache_dir:
        os.makedirs(cache_dir, exist_ok=True)
        path = os.path.join(cache_dir, f"library_{size}_{seed}_{specs_key(specs, max_depth)}.pkl")
        if os.path.exists(path):
            try:
                with open(path, "rb") as f:
                    snap = pickle.load(f)
                return snap, specs, time.perf_counter() - t0, True
            except (AttributeError, ImportError, EOFError, pickle.UnpicklingError, TypeError):
                pass  # written by other code (the classes changed since) or cut short: build it again
    from cocoda_jax.library import LibrarySnapshot

    snap = LibrarySnapshot.from_json(library_json(specs, max_depth), verify_examples=False)
    seconds = time.perf_counter() - t0
    if path:
        tmp = path + ".tmp"
        with open(tmp, "wb") as f:
            pickle.dump(snap, f, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, path)
        with open(path + ".build_seconds", "w") as f:
            f.write(f"{seconds:.1f}\n")
    return snap, specs, seconds, False


@dataclasses.dataclass(frozen=True)
class Query:
    text: str
    answer_type: str
    gold: str


def _value_for(type_text: str, name: str, rng: random.Random) -> Any:
    if type_text == F:
        return round(rng.uniform(1.0, 500.0), 1)
    if type_text == I:
        return rng.randint(1, 9)
    if type_text == LF:
        return [round(rng.uniform(1.0, 100.0), 1) for _ in range(rng.randint(3, 6))]
    if type_text == LS:
        return [rng.choice(("red", "blue", "green", "north", "late", "open")) for _ in range(rng.randint(2, 4))]
    if type_text == T:
        return {"rows": [{"qty": rng.randint(1, 20), "kind": rng.choice(("a", "b"))} for _ in range(rng.randint(2, 3))]}
    if type_text == S:
        if name in ("date", "start", "end") or name.rstrip("0123456789") in ("date", "start", "end"):
            return f"2024-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
        if name.rstrip("0123456789") == "col":
            return "qty"
        return rng.choice(("quarterly report", "Ada Lovelace", "late shipment notice", "open", "kind"))
    raise ValueError(f"no value generator for {type_text}")


def _value_text(v: Any) -> str:
    if isinstance(v, str):
        return v if len(v) == 10 and v[4] == "-" and v[7] == "-" else json.dumps(v)
    return json.dumps(v)


def make_queries(specs: list[Spec], n: int, seed: int = 0) -> list[Query]:
    """``n`` gold-labelled queries: a sampled tool's question phrasing (not its description), its
    entity, and values of its parameter types in order; deterministic in ``seed``."""
    rng = random.Random(seed * 7919 + 17)
    chosen = rng.sample(range(len(specs)), min(n, len(specs)))
    out = []
    for i in chosen:
        s = specs[i]
        vals = [_value_for(t, name, rng) for name, t in s.params]
        vtext = ", ".join(_value_text(v) for v in vals)
        template = rng.choice(s.asks)
        template = template.replace("{v}", "\x00", 1).replace("{v}", "them").replace("\x00", "{v}")
        out.append(Query(template.format(e=s.entity, v=vtext), s.result, s.name))
    return out
