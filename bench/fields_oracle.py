#!/usr/bin/env python3
"""Brute-force oracle for searchd's typed fields: filters, counts, facets, sorted pages, filtered kNN.

    python3 bench/fields_oracle.py --self-test            # checks the oracle itself, no server
    python3 bench/fields_oracle.py                        # full run: 10,000 docs, 2,000 requests
    python3 bench/fields_oracle.py --docs 10000 --seed 7 --dim 64 --requests 2000 \\
        [--bin target/release/searchd] [--work bench/data/fields-oracle] \\
        [--json bench/results/fields-oracle.json] [--md bench/results/fields-oracle.md]
    python3 bench/fields_oracle.py --load [--skip-oracle] [--load-warmup 2s --load-duration 5s]

numpy is needed (exact kNN). When `import numpy` fails the script re-runs itself under
bench/.venv-oracle/bin/python, creating it first with `python3 -m venv bench/.venv-oracle &&
bench/.venv-oracle/bin/pip install numpy` (git ignores bench/.venv-*).

Full run:
 1. a seeded corpus (JSONL): id d{i}, text, unit vector `vec` (Gaussian clusters), brand (keyword,
    Zipf over 200 values, ~10% missing), price (float, one decimal, ties, ~5% missing), stock
    (integer, 30% zeros), tags (0..4 Zipf keywords of 30, duplicates possible), active (bool),
    created (RFC 3339, two years at hour granularity, ties);
 2. `searchd ingest --vector-field vec` and `searchd serve --collection t=DIR` on a free port;
 3. a seeded mix of requests, each compared with the oracle: GET docs/{id} (and 404), count,
    facet, scroll (with real cursors, incl. null = missing values), filtered vector search
    (tie-aware recall@10 per selectivity bucket, no hit may fail the filter), the
    Elasticsearch-shaped _search/_count/_doc/_mget; cursor walks to the end (> 3,000 deep);
    a table of bad inputs that must be 400 invalid_argument naming the offending part;
 4. bench/results/fields-oracle.{json,md}; exit status 1 on any mismatch / floor miss / bad-input
    failure, 2 on a setup error (build, ingest, server start).
 5. --load: five read bodies files (get, page, after, facet, count) for `searchd load --mix`,
    at 1 and 8 connections, cache cold and warm, server with and without --cache-bytes 64MiB;
    bench/results/fields-reads.{json,md} with p50/p95/p99 per operation and the targets at
    8 clients cold (p95 <= 2 ms get/count/facet, <= 5 ms page/after).

Semantics the oracle implements (Elasticsearch's where the contract is silent):
- an array field matches a clause when any element does (range: one element within all bounds);
  exists = at least one non-null value (null and [] are missing);
- bool: must and filter all match, must_not none, should >= minimum_should_match, whose default is
  1 when there is no must/filter and at least one should, else 0; an empty bool matches all;
- sort: missing values last for asc and desc; arrays sort by min (asc) / max (desc); an implicit
  `id` asc tiebreaker is appended unless `id` is a key, and every hit's `sort` holds one value per
  key including it; missing values appear as null in `sort` (and may be sent back as cursor values);
  datetimes sort as epoch milliseconds; strings compare bytewise; `next` = last hit's `sort` when
  the page is full, else null; the same holds for `_search` hits' `sort` and `search_after`;
- facet: each document counts once per distinct value; count desc then value asc; other_count =
  sum of the counts not returned.
"""

import argparse
import bisect
import functools
import http.client
import json
import math
import os
import random
import re
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from datetime import datetime, timedelta, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
VENV = HERE / ".venv-oracle"


def ensure_numpy():
    """Import numpy, or re-exec under bench/.venv-oracle (created on first use)."""
    try:
        import numpy  # noqa: F401
        return
    except ImportError:
        pass
    vpy = VENV / "bin" / "python"
    if vpy.exists() and Path(sys.prefix).resolve() == VENV.resolve():
        sys.exit("numpy missing even in bench/.venv-oracle")
    if not vpy.exists():
        print(f"creating {VENV} (numpy)", file=sys.stderr)
        subprocess.check_call([sys.executable, "-m", "venv", str(VENV)])
        subprocess.check_call([str(vpy), "-m", "pip", "install", "--quiet", "numpy"])
    os.execv(str(vpy), [str(vpy), str(Path(__file__).resolve())] + sys.argv[1:])


ensure_numpy()
import numpy as np  # noqa: E402

SCHEMA = "searchd.bench.fields-oracle.v1"
READS_SCHEMA = "searchd.bench.fields-reads.v1"
COLL = "t"
SIZE_CAP = 10000
EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
T0 = datetime(2023, 1, 1, tzinfo=timezone.utc)
HOURS = 2 * 365 * 24
RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$")
VOCAB = ("alpha beta gamma delta river stone cloud ember frost grove harbor island jade kite "
         "lumen maple north opal pine quartz raven sable tide umber vale willow xenon yarrow zephyr").split()
N_BRANDS, N_TAGS = 200, 30
K = 10
RECALL_FLOOR = 0.95
BUCKETS = [(0.005, "<0.5%"), (0.05, "0.5-5%"), (0.25, "5-25%"), (0.6, "25-60%"), (1.01, ">=60%")]


QUIET = []  # non-empty: no progress lines (self-test)


def log(msg):
    if QUIET:
        return
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


class BadRequest(Exception):
    """What the server must answer 400 invalid_argument for; the message names the path."""


# ----------------------------------------------------------------------------- corpus

def zipf_weights(n, s=1.1):
    return [1.0 / (r + 1) ** s for r in range(n)]


def fmt_dt(dt):
    return dt.strftime("%Y-%m-%dT%H:%M:%SZ")


def make_vectors(n, dim, seed, clusters=32):
    """Unit vectors around `clusters` Gaussian centres, rounded to 6 decimals (what the JSON says)."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((clusters, dim))
    which = rng.integers(0, clusters, n)
    x = centres[which] + 0.6 * rng.standard_normal((n, dim))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return np.round(x, 6)


def make_queries(nq, dim, seed, clusters=32):
    """Query vectors from the same cluster model (same centres: same seed stream)."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((clusters, dim))
    qrng = np.random.default_rng(seed + 1_000_003)
    q = centres[qrng.integers(0, clusters, nq)] + 0.8 * qrng.standard_normal((nq, dim))
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    return np.round(q, 6)


def make_doc(i, rng, vec, brand_w, tag_w):
    """One document; the fields are drawn independently of each other."""
    doc = {"id": f"d{i}", "text": " ".join(rng.choice(VOCAB) for _ in range(rng.randint(3, 8))),
           "vec": [float(v) for v in vec]}
    if rng.random() >= 0.10:
        doc["brand"] = "b%03d" % rng.choices(range(N_BRANDS), brand_w)[0]
    if rng.random() >= 0.05:
        doc["price"] = round(rng.uniform(0, 100), 1)
    doc["stock"] = 0 if rng.random() < 0.30 else rng.randint(1, 500)
    doc["tags"] = ["t%d" % t for t in rng.choices(range(N_TAGS), tag_w, k=rng.randint(0, 4))]
    doc["active"] = rng.random() < 0.5
    doc["created"] = fmt_dt(T0 + timedelta(hours=rng.randrange(HOURS)))
    return doc


def make_corpus(n, seed, dim):
    rng = random.Random(seed)
    vecs = make_vectors(n, dim, seed)
    bw, tw = zipf_weights(N_BRANDS), zipf_weights(N_TAGS, 1.0)
    return [make_doc(i, rng, vecs[i], bw, tw) for i in range(n)]


def corpus_jsonl(docs):
    return "".join(json.dumps(d, separators=(",", ":")) + "\n" for d in docs)


def stored_fields(doc):
    return {k: v for k, v in doc.items() if k not in ("id", "vec")}


# ----------------------------------------------------------------------------- oracle

def parse_dt_ms(v, path="value"):
    if not isinstance(v, str) or not RFC3339.match(v):
        raise BadRequest(f"{path}: not an RFC 3339 datetime: {v!r}")
    try:
        dt = datetime.fromisoformat(v.replace("Z", "+00:00"))
    except ValueError as e:
        raise BadRequest(f"{path}: bad datetime {v!r}: {e}")
    return (dt - EPOCH) // timedelta(milliseconds=1)


def elements(doc, field):
    """Non-null values of a field as a list (scalars wrapped, arrays flattened)."""
    v = doc.get(field)
    if v is None:
        return []
    return [x for x in (v if isinstance(v, list) else [v]) if x is not None]


def infer_schema(docs, text_field="text"):
    """Field -> keyword | datetime | bool | integer | float | text, as ingest infers them."""
    kinds = {}
    for d in docs:
        for f in d:
            if f in ("id", "vec"):
                continue
            s = kinds.setdefault(f, set())
            for x in elements(d, f):
                s.add("bool" if isinstance(x, bool) else "integer" if isinstance(x, int)
                      else "float" if isinstance(x, float) else "string")
    schema = {}
    for f, s in kinds.items():
        if f == text_field:
            schema[f] = "text"
        elif s == {"bool"}:
            schema[f] = "bool"
        elif s and s <= {"integer"}:
            schema[f] = "integer"
        elif s and s <= {"integer", "float"}:
            schema[f] = "float"
        elif all(RFC3339.match(x) for d in docs for x in elements(d, f) if isinstance(x, str)) and s == {"string"}:
            schema[f] = "datetime"
        else:
            schema[f] = "keyword"
    return schema


def cmp_scalar(a, b):
    return (a > b) - (a < b)


def cmp_sort_values(a, b, orders):
    """Compare two sort-value lists; None (missing) sorts last in both directions."""
    for x, y, (_, order) in zip(a, b, orders):
        if x is None or y is None:
            if x is None and y is None:
                continue
            return 1 if x is None else -1
        c = cmp_scalar(x, y)
        if c:
            return c if order == "asc" else -c
    return 0


class Oracle:
    """Brute force over the same documents: numpy masks for filters, exact sorts and kNN."""

    def __init__(self, docs, schema=None):
        self.docs = docs
        self.n = len(docs)
        self.schema = schema or infer_schema(docs)
        self.row_of = {d["id"]: i for i, d in enumerate(docs)}
        self.ids = [d["id"] for d in docs]
        self._index()
        self._orders = {}
        vec = [d.get("vec") for d in docs]
        if all(v is not None for v in vec) and docs:
            x = np.asarray(vec, dtype=np.float64)
            self.x = x / np.linalg.norm(x, axis=1, keepdims=True)
        else:
            self.x = None

    def _index(self):
        """Per field: exists mask; keyword/bool: value -> mask; numeric/datetime: element arrays."""
        self.exists, self.kw, self.num = {}, {}, {}
        for f, t in self.schema.items():
            ex = np.zeros(self.n, bool)
            rows, vals, kw = [], [], {}
            for i, d in enumerate(self.docs):
                el = elements(d, f)
                ex[i] = bool(el)
                for x in el:
                    if t in ("keyword", "bool", "text"):
                        kw.setdefault(x, np.zeros(self.n, bool))[i] = True
                    else:
                        rows.append(i)
                        vals.append(parse_dt_ms(x) if t == "datetime" else float(x))
            self.exists[f] = ex
            if t in ("keyword", "bool", "text"):
                self.kw[f] = kw
            else:
                self.num[f] = (np.asarray(rows, np.int64), np.asarray(vals, np.float64))

    # -- filters (mask evaluator, validating) --------------------------------

    def field_type(self, f, path):
        if not isinstance(f, str) or f not in self.schema:
            raise BadRequest(f"{path}: unknown field {f!r}")
        return self.schema[f]

    def typed_value(self, t, v, path):
        """A term/range value as the field's type compares it, or BadRequest."""
        if t == "keyword" and isinstance(v, str):
            return v
        if t == "bool" and isinstance(v, bool):
            return v
        if t in ("integer", "float") and isinstance(v, (int, float)) and not isinstance(v, bool):
            return float(v)
        if t == "datetime":
            return float(parse_dt_ms(v, path))
        raise BadRequest(f"{path}: value {json.dumps(v)} does not fit field type {t}")

    def mask(self, f, depth=0, path="filter"):
        """Rows matching filter f (None = all) as a bool array; raises BadRequest when invalid."""
        if f is None:
            return np.ones(self.n, bool)
        if not isinstance(f, dict) or len(f) != 1:
            raise BadRequest(f"{path}: a clause is an object with exactly one key")
        (name, arg), = f.items()
        p = f"{path}.{name}"
        handler = {"term": self._m_term, "terms": self._m_terms, "range": self._m_range,
                   "exists": self._m_exists, "ids": self._m_ids, "bool": self._m_bool}.get(name)
        if handler is None:
            raise BadRequest(f"{path}: unknown clause {name!r}")
        return handler(arg, depth, p)

    def _one_field(self, arg, path):
        if not isinstance(arg, dict) or len(arg) != 1:
            raise BadRequest(f"{path}: expects one field")
        (fld, v), = arg.items()
        return fld, v, self.field_type(fld, f"{path}.{fld}")

    def _eq_mask(self, fld, t, v):
        if t in ("keyword", "bool"):
            return self.kw[fld].get(v, np.zeros(self.n, bool)).copy()
        if t == "text":
            raise BadRequest(f"{fld}: term on a text field")
        rows, vals = self.num[fld]
        m = np.zeros(self.n, bool)
        m[rows[vals == v]] = True
        return m

    def _m_term(self, arg, depth, path):
        fld, v, t = self._one_field(arg, path)
        if isinstance(v, (dict, list)):
            raise BadRequest(f"{path}.{fld}: term value must be a scalar")
        return self._eq_mask(fld, t, self.typed_value(t, v, f"{path}.{fld}"))

    def _m_terms(self, arg, depth, path):
        fld, vs, t = self._one_field(arg, path)
        if not isinstance(vs, list):
            raise BadRequest(f"{path}.{fld}: terms takes an array")
        m = np.zeros(self.n, bool)
        for j, v in enumerate(vs):
            if isinstance(v, (dict, list)):
                raise BadRequest(f"{path}.{fld}[{j}]: must be a scalar")
            m |= self._eq_mask(fld, t, self.typed_value(t, v, f"{path}.{fld}[{j}]"))
        return m

    def _m_range(self, arg, depth, path):
        fld, bounds, t = self._one_field(arg, path)
        if t not in ("integer", "float", "datetime"):
            raise BadRequest(f"{path}.{fld}: range needs a numeric or datetime field, {fld} is {t}")
        if not isinstance(bounds, dict) or not bounds:
            raise BadRequest(f"{path}.{fld}: range takes gte/gt/lte/lt")
        rows, vals = self.num[fld]
        ok = np.ones(len(vals), bool)
        ops = {"gte": np.greater_equal, "gt": np.greater, "lte": np.less_equal, "lt": np.less}
        for op, b in bounds.items():
            if op not in ops:
                raise BadRequest(f"{path}.{fld}: unknown range bound {op!r}")
            ok &= ops[op](vals, self.typed_value(t, b, f"{path}.{fld}.{op}"))
        m = np.zeros(self.n, bool)
        m[rows[ok]] = True
        return m

    def _m_exists(self, arg, depth, path):
        if not isinstance(arg, dict) or set(arg) != {"field"}:
            raise BadRequest(f"{path}: exists takes {{\"field\": F}}")
        self.field_type(arg["field"], f"{path}.field")
        return self.exists[arg["field"]].copy()

    def _m_ids(self, arg, depth, path):
        if not isinstance(arg, dict) or not isinstance(arg.get("values"), list):
            raise BadRequest(f"{path}: ids takes {{\"values\": [...]}}")
        m = np.zeros(self.n, bool)
        for v in arg["values"]:
            if v in self.row_of:
                m[self.row_of[v]] = True
        return m

    def _m_bool(self, arg, depth, path):
        if depth + 1 > 32:
            raise BadRequest(f"{path}: bool nested deeper than 32")
        if not isinstance(arg, dict):
            raise BadRequest(f"{path}: bool takes an object")
        kids = {}
        for key, v in arg.items():
            if key == "minimum_should_match":
                continue
            if key not in ("must", "filter", "should", "must_not"):
                raise BadRequest(f"{path}: unknown bool key {key!r}")
            v = v if isinstance(v, list) else [v]
            kids[key] = [self.mask(c, depth + 1, f"{path}.{key}[{j}]") for j, c in enumerate(v)]
        m = np.ones(self.n, bool)
        for c in kids.get("must", []) + kids.get("filter", []):
            m &= c
        for c in kids.get("must_not", []):
            m &= ~c
        should = kids.get("should", [])
        msm = arg.get("minimum_should_match")
        if msm is None:
            msm = 1 if should and not (kids.get("must") or kids.get("filter")) else 0
        if should or msm:
            hits = np.sum(should, axis=0) if should else np.zeros(self.n, int)
            m &= hits >= msm
        return m

    def count(self, f):
        return int(np.count_nonzero(self.mask(f)))

    # -- sorting --------------------------------------------------------------

    def norm_sort(self, sort, path="sort"):
        """Sort spec -> [(field, asc|desc)], with the implicit `id` asc tiebreaker appended."""
        if sort is None:
            sort = []
        if not isinstance(sort, list):
            raise BadRequest(f"{path}: must be an array")
        out = []
        for j, s in enumerate(sort):
            if isinstance(s, str):
                fld, order = s, "asc"
            elif isinstance(s, dict) and len(s) == 1:
                (fld, order), = s.items()
                if isinstance(order, dict):
                    order = order.get("order", "asc")
            else:
                raise BadRequest(f"{path}[{j}]: bad sort key")
            if order not in ("asc", "desc"):
                raise BadRequest(f"{path}[{j}].{fld}: order must be asc or desc")
            if fld != "id" and self.field_type(fld, f"{path}[{j}]") in ("text", "bool"):
                raise BadRequest(f"{path}[{j}]: cannot sort on {fld}")
            out.append((fld, order))
        if "id" not in [f for f, _ in out]:
            out.append(("id", "asc"))
        return out

    def sort_value(self, row, fld, order):
        if fld == "id":
            return self.ids[row]
        t = self.schema[fld]
        el = elements(self.docs[row], fld)
        if not el:
            return None
        if t == "datetime":
            el = [parse_dt_ms(x) for x in el]
        return min(el) if order == "asc" else max(el)

    def sort_values(self, row, orders):
        return [self.sort_value(row, f, o) for f, o in orders]

    def order(self, orders):
        """All rows in sort order (cached per spec): list of rows, list of their sort values."""
        key = json.dumps(orders)
        if key not in self._orders:
            svs = [self.sort_values(r, orders) for r in range(self.n)]
            cmpk = functools.cmp_to_key(lambda a, b: cmp_sort_values(svs[a], svs[b], orders))
            rows = sorted(range(self.n), key=cmpk)
            self._orders[key] = (np.asarray(rows, np.int64), svs)
        return self._orders[key]

    def sorted_rows(self, f, orders):
        rows, svs = self.order(orders)
        return rows[self.mask(f)[rows]].tolist(), svs

    def page(self, f, sort, size, after=None, path_after="after"):
        """Exact page: hits [(row, sort values)] after the cursor, and `next`."""
        if not isinstance(size, int) or size < 0 or size > SIZE_CAP:
            raise BadRequest(f"size: must be 0..{SIZE_CAP}")
        orders = self.norm_sort(sort)
        rows, svs = self.sorted_rows(f, orders)
        start = 0
        if after is not None:
            if not isinstance(after, list) or len(after) != len(orders):
                raise BadRequest(f"{path_after}: cursor needs {len(orders)} values (one per sort key)")
            cmpk = functools.cmp_to_key(lambda a, b: cmp_sort_values(a, b, orders))
            start = bisect.bisect_right(rows, cmpk(after), key=lambda r: cmpk(svs[r]))
        hits = [(r, svs[r]) for r in rows[start:start + size]]
        nxt = hits[-1][1] if hits and len(hits) == size else None
        return hits, nxt

    # -- facets and kNN -------------------------------------------------------

    def facet(self, fld, f, size):
        if self.field_type(fld, "field") != "keyword":
            raise BadRequest(f"field: facet needs a keyword field, {fld} is {self.schema[fld]}")
        m = self.mask(f)
        counts = [(v, int(np.count_nonzero(m & vm))) for v, vm in self.kw[fld].items()]
        counts = sorted((c for c in counts if c[1] > 0), key=lambda c: (-c[1], c[0].encode()))
        return counts[:size], sum(c for _, c in counts[size:])

    def knn(self, q, f, k):
        """Exact filtered cosine top-k: (rows, scores, matching count, score of row -> dict)."""
        m = self.mask(f)
        rows = np.flatnonzero(m)
        qn = np.asarray(q, np.float64)
        qn = qn / np.linalg.norm(qn)
        scores = self.x[rows] @ qn
        top = np.argsort(-scores, kind="stable")[:k]
        return rows[top].tolist(), scores[top].tolist(), len(rows), m


# -- naive per-document evaluation (independent code path for the self-test) -----

def naive_match(doc, f, schema):
    if f is None:
        return True
    (name, arg), = f.items()
    if name == "bool":
        must = arg.get("must", []) + arg.get("filter", [])
        should, must_not = arg.get("should", []), arg.get("must_not", [])
        if not all(naive_match(doc, c, schema) for c in must):
            return False
        if any(naive_match(doc, c, schema) for c in must_not):
            return False
        msm = arg.get("minimum_should_match", 1 if should and not must else 0)
        return sum(naive_match(doc, c, schema) for c in should) >= msm
    if name == "ids":
        return doc["id"] in arg["values"]
    if name == "exists":
        return len(elements(doc, arg["field"])) > 0
    (fld, v), = arg.items()
    conv = (lambda x: parse_dt_ms(x)) if schema[fld] == "datetime" else (lambda x: x)
    els = [conv(x) for x in elements(doc, fld)]
    if name == "term":
        return any(x == conv(v) for x in els)
    if name == "terms":
        return any(x == conv(w) for x in els for w in v)
    if name == "range":
        def inside(x):
            return all({"gte": x >= conv(b), "gt": x > conv(b), "lte": x <= conv(b), "lt": x < conv(b)}[op]
                       for op, b in v.items())
        return any(inside(x) for x in els)
    raise ValueError(name)


def naive_facet(docs, rows, fld, size):
    c = Counter(v for r in rows for v in set(elements(docs[r], fld)))
    items = sorted(c.items(), key=lambda kv: (-kv[1], kv[0]))
    return items[:size], sum(n for _, n in items[size:])


def naive_sort_key(oracle, row, orders):
    """Tuple sort key (missing flag, value or negated value) for numeric/id/keyword-asc specs."""
    key = []
    for fld, order in orders:
        v = oracle.sort_value(row, fld, order)
        if v is None:
            key.append((1, 0))
        elif isinstance(v, str):
            assert order == "asc"
            key.append((0, v))
        else:
            key.append((0, v if order == "asc" else -v))
    return tuple(key)


# ----------------------------------------------------------------------------- filter generator

class FilterGen:
    """Seeded random filters of the DSL subset, with hand-picked anchors of known selectivity."""

    def __init__(self, docs, rng):
        self.rng = rng
        self.docs = docs
        self.prices = sorted({d["price"] for d in docs if "price" in d}) or [1.0]
        self.created = sorted({d["created"] for d in docs if "created" in d}) or [fmt_dt(T0)]
        self.ids = [d["id"] for d in docs]

    def brand(self, hot=None):
        r = self.rng
        rank = int(min(N_BRANDS - 1, r.paretovariate(0.7) - 1)) if hot is None else hot
        return "b%03d" % rank

    def tag(self):
        return "t%d" % int(min(N_TAGS - 1, self.rng.paretovariate(0.6) - 1))

    def dt_bound(self):
        r = self.rng
        if r.random() < 0.5:
            return r.choice(self.created)  # an existing value: inclusive/exclusive edges matter
        return fmt_dt(T0 + timedelta(days=r.randrange(730)))

    def range_price(self):
        r = self.rng
        a, b = sorted(r.sample(self.prices, 2))
        if r.random() < 0.2:
            a, b = int(a), int(b) + 1  # integer bounds on a float field
        lo, hi = r.choice(["gte", "gt"]), r.choice(["lte", "lt"])
        pick = r.random()
        if pick < 0.3:
            return {"range": {"price": {lo: a}}}
        if pick < 0.5:
            return {"range": {"price": {hi: b}}}
        return {"range": {"price": {lo: a, hi: b}}}

    def range_stock(self):
        r = self.rng
        return r.choice([{"range": {"stock": {"lte": 0}}}, {"range": {"stock": {"gt": r.randint(0, 500)}}},
                         {"range": {"stock": {"gte": r.randint(0, 250), "lt": r.randint(250, 501)}}}])

    def range_created(self):
        r = self.rng
        a, b = sorted([self.dt_bound(), self.dt_bound()])
        return r.choice([{"range": {"created": {"gte": a}}}, {"range": {"created": {"lt": b}}},
                         {"range": {"created": {"gt": a, "lte": b}}}])

    def leaf(self):
        r = self.rng
        kind = r.choices(["term_brand", "terms_brand", "term_tags", "terms_tags", "price", "stock",
                          "created", "exists", "ids", "active", "term_price", "term_stock", "term_created"],
                         [10, 5, 8, 6, 10, 6, 8, 5, 3, 5, 2, 2, 1])[0]
        if kind == "term_brand":
            return {"term": {"brand": self.brand()}}
        if kind == "terms_brand":
            return {"terms": {"brand": [self.brand() for _ in range(r.randint(1, 4))]}}
        if kind == "term_tags":
            return {"term": {"tags": self.tag()}}
        if kind == "terms_tags":
            return {"terms": {"tags": [self.tag() for _ in range(r.randint(1, 3))]}}
        if kind == "price":
            return self.range_price()
        if kind == "stock":
            return self.range_stock()
        if kind == "created":
            return self.range_created()
        if kind == "exists":
            return {"exists": {"field": r.choice(["brand", "price", "tags", "stock", "created"])}}
        if kind == "ids":
            vals = r.sample(self.ids, r.randint(1, 12)) + (["nope-%d" % r.randint(0, 9)] if r.random() < .3 else [])
            return {"ids": {"values": vals}}
        if kind == "active":
            return {"term": {"active": r.random() < 0.5}}
        if kind == "term_price":
            return {"term": {"price": r.choice(self.prices)}}
        if kind == "term_stock":
            return {"term": {"stock": r.choice([0, r.randint(1, 500)])}}
        return {"term": {"created": r.choice(self.created)}}

    def random(self, depth=1):
        """A random filter; bool nested up to depth 3."""
        r = self.rng
        if depth > 3 or r.random() < 0.5:
            return self.leaf()
        if r.random() < 0.03:
            return {"bool": {}}
        b = {}
        for key in r.sample(["must", "filter", "should", "must_not"], r.randint(1, 3)):
            b[key] = [self.random(depth + 1) for _ in range(r.randint(1, 3))]
        if "should" in b and r.random() < 0.35:
            b["minimum_should_match"] = r.randint(0, len(b["should"]))
        return {"bool": b}

    def anchors(self):
        """Filters of designed selectivity, ~0.1% to ~90%, incl. a 2 x ~20% AND."""
        q20 = self.created[len(self.created) // 5]
        return [
            {"ids": {"values": self.rng.sample(self.ids, 10)}},
            {"term": {"brand": "b150"}},
            {"range": {"price": {"gte": 10.5, "lt": 11.5}}},
            {"bool": {"filter": [{"range": {"price": {"lt": 20}}}, {"range": {"created": {"lt": q20}}}]}},
            {"bool": {"must": [{"term": {"brand": "b000"}}], "must_not": [{"term": {"active": True}}]}},
            {"term": {"brand": "b000"}},
            {"bool": {"should": [{"term": {"tags": "t0"}}, {"term": {"tags": "t1"}}], "minimum_should_match": 2}},
            {"bool": {"must_not": [{"term": {"active": True}}]}},
            {"range": {"stock": {"gt": 0}}},
            {"exists": {"field": "brand"}},
            {"bool": {"should": [{"exists": {"field": "brand"}}, {"range": {"price": {"gte": 50}}}]}},
        ]

    def pick(self):
        r = self.rng.random()
        if r < 0.10:
            return None
        if r < 0.35:
            return self.rng.choice(self.anchors())
        return self.random()


SCROLL_SORTS = [[{"price": "desc"}, {"created": "asc"}], [{"stock": "asc"}], ["id"], [{"price": "asc"}],
                [{"created": "desc"}], [{"tags": "asc"}], [{"tags": "desc"}, {"price": "asc"}],
                [{"brand": "asc"}, {"stock": "desc"}], [{"brand": "desc"}], [{"id": "desc"}],
                [{"stock": "desc"}, {"id": "asc"}]]
ES_SORTS = [s for s in SCROLL_SORTS if "id" not in json.dumps(s)]


# ----------------------------------------------------------------------------- comparison

def strict_equal(a, b):
    """JSON equality that keeps types apart: 10 != 10.0, true != 1 (stored values come back as given)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(strict_equal(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(strict_equal(x, y) for x, y in zip(a, b))
    return a == b


def sort_value_equal(a, b):
    """Sort values: numbers numerically (f32/f64 slack), strings and null exactly."""
    if a is None or b is None or isinstance(a, (str, bool)) or isinstance(b, (str, bool)):
        return a == b and type(a) is type(b)
    if not isinstance(a, (int, float)) or not isinstance(b, (int, float)):
        return False
    return abs(a - b) <= 1e-6 * max(1.0, abs(a), abs(b))


def sort_list_equal(a, b):
    return isinstance(a, list) and isinstance(b, list) and len(a) == len(b) and all(
        sort_value_equal(x, y) for x, y in zip(a, b))


def first_diff(exp, got):
    """Index and neighbourhood of the first difference of two id lists."""
    for i, (x, y) in enumerate(zip(exp, got)):
        if x != y:
            return {"index": i, "expected": exp[max(0, i - 2):i + 3], "got": got[max(0, i - 2):i + 3]}
    if len(exp) != len(got):
        n = min(len(exp), len(got))
        return {"index": n, "expected_len": len(exp), "got_len": len(got),
                "expected": exp[n:n + 3], "got": got[n:n + 3]}
    return None


def truncate(obj, limit=1500):
    s = json.dumps(obj)
    return obj if len(s) <= limit else s[:limit] + "...(truncated)"


# ----------------------------------------------------------------------------- tally

class Tally:
    """Checked / mismatched per operation, the first mismatches, recall samples, bad inputs."""

    def __init__(self, keep=25):
        self.ops = {}
        self.mismatches = []
        self.keep = keep
        self.recall = []  # (selectivity, recall)
        self.knn_hard = 0
        self.bad_inputs = []
        self.walks = []
        self.notes = []

    def check(self, op, ok, request=None, diff=None):
        c = self.ops.setdefault(op, {"checked": 0, "mismatched": 0})
        c["checked"] += 1
        if not ok:
            c["mismatched"] += 1
            if len(self.mismatches) < self.keep:
                self.mismatches.append({"op": op, "request": truncate(request), "diff": truncate(diff)})
        return ok

    def total_mismatched(self):
        return sum(c["mismatched"] for c in self.ops.values())


# ----------------------------------------------------------------------------- HTTP

class Client:
    """One keep-alive HTTP connection; request() -> (status, parsed JSON or None, raw text)."""

    def __init__(self, host, port, timeout=30):
        self.host, self.port, self.timeout = host, port, timeout
        self.conn = None

    def request(self, method, path, body=None):
        data = None if body is None else json.dumps(body).encode()
        for attempt in range(2):
            try:
                if self.conn is None:
                    self.conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
                hdr = {"Content-Type": "application/json"} if data is not None else {}
                self.conn.request(method, path, body=data, headers=hdr)
                resp = self.conn.getresponse()
                raw = resp.read().decode("utf-8", "replace")
                try:
                    parsed = json.loads(raw) if raw else None
                except ValueError:
                    parsed = None
                return resp.status, parsed, raw
            except (OSError, http.client.HTTPException):
                self.conn = None
                if attempt:
                    raise
        raise AssertionError("unreachable")


class FakeClient:
    """The oracle as a server (self-test): same routes, optionally with an injected bug."""

    def __init__(self, oracle, bug=None):
        self.o, self.bug = oracle, bug

    def request(self, method, path, body=None):
        try:
            st, out = self._route(method, path, body or {})
        except BadRequest as e:
            st, out = 400, {"error": {"code": "invalid_argument", "message": str(e)}}
        return st, out, json.dumps(out)

    def _route(self, method, path, b):
        o = self.o
        p = path.split("/")
        if method == "GET" and path.startswith(f"/collections/{COLL}/docs/"):
            r = o.row_of.get(p[-1])
            if r is None:
                return 404, {"error": {"code": "not_found", "message": p[-1]}}
            return 200, {"id": p[-1], "fields": stored_fields(o.docs[r])}
        if path == f"/collections/{COLL}/count":
            c = o.count(b.get("filter"))
            return 200, {"count": c + (1 if self.bug == "count" and c > 100 else 0)}
        if path == f"/collections/{COLL}/facet":
            buckets, other = o.facet(b.get("field"), b.get("filter"), b.get("size", 10))
            return 200, {"buckets": [{"value": v, "count": c} for v, c in buckets], "other_count": other}
        if path == f"/collections/{COLL}/scroll":
            hits, nxt = o.page(b.get("filter"), b.get("sort"), b.get("size", 10), b.get("after"))
            if self.bug == "tie" and len(hits) > 2:
                hits = [hits[1], hits[0]] + hits[2:]
            return 200, {"hits": [{"id": o.ids[r], "sort": sv, "fields": stored_fields(o.docs[r])}
                                  for r, sv in hits], "next": nxt}
        if path == f"/collections/{COLL}/search":
            rows, scores, _, _ = o.knn(b["vector"], b.get("filter"), b.get("k", 10))
            if self.bug == "knn":
                rows = [0] + rows[1:]
            return 200, {"hits": [{"id": o.ids[r], "score": s} for r, s in zip(rows, scores)]}
        return self._es(method, path, b)

    def _es(self, method, path, b):
        o = self.o
        if path == f"/{COLL}/_count":
            return 200, {"count": o.count(b.get("query"))}
        if path.startswith(f"/{COLL}/_doc/"):
            i = path.split("/")[-1]
            r = o.row_of.get(i)
            if r is None:
                return 404, {"_id": i, "found": False}
            return 200, {"_id": i, "found": True, "_source": stored_fields(o.docs[r])}
        if path == f"/{COLL}/_mget":
            return 200, {"docs": [{"_id": i, "found": False} if i not in o.row_of else
                                  {"_id": i, "found": True, "_source": stored_fields(o.docs[o.row_of[i]])}
                                  for i in b["ids"]]}
        if path == f"/{COLL}/_search":
            for key in b:
                if key not in ("query", "sort", "size", "search_after", "track_total_hits", "aggs", "from"):
                    raise BadRequest(f"{key}: not supported")
            for name, a in (b.get("aggs") or {}).items():
                if "terms" not in a:
                    raise BadRequest(f"aggs.{name}.{next(iter(a))}: not supported")
            hits, _ = o.page(b.get("query"), b.get("sort"), b.get("from", 0) + b.get("size", 10),
                             b.get("search_after"), "search_after")
            hits = hits[b.get("from", 0):]
            out = {"hits": {"total": {"value": o.count(b.get("query")), "relation": "eq"},
                            "hits": [{"_id": o.ids[r], "_source": stored_fields(o.docs[r]), "sort": sv}
                                     for r, sv in hits]}}
            aggs = {}
            for name, a in (b.get("aggs") or {}).items():
                bk, other = o.facet(a["terms"]["field"], b.get("query"), a["terms"].get("size", 10))
                aggs[name] = {"buckets": [{"key": v, "doc_count": c} for v, c in bk], "sum_other_doc_count": other}
            if aggs:
                out["aggregations"] = aggs
            return 200, out
        return 404, {"error": {"code": "not_found", "message": path}}


# ----------------------------------------------------------------------------- checks

class Checker:
    """Sends one kind of request at a time and compares the answer with the oracle."""

    def __init__(self, client, oracle, tally, rng, queries):
        self.c, self.o, self.t, self.rng, self.q = client, oracle, tally, rng, queries
        self.gen = FilterGen(oracle.docs, rng)

    def post(self, path, body):
        return self.c.request("POST", path, body)

    def _status(self, op, req, st, want=200, body=None):
        if st != want:
            self.t.check(op, False, req, {"status": st, "want": want, "body": body})
            return False
        return True

    # -- docs by id ------------------------------------------------------------

    def get_doc(self):
        r = self.rng.randrange(self.o.n)
        i = self.o.ids[r]
        req = {"method": "GET", "path": f"/collections/{COLL}/docs/{i}"}
        st, body, _ = self.c.request("GET", req["path"])
        if not self._status("get", req, st, body=body):
            return
        exp = {"id": i, "fields": stored_fields(self.o.docs[r])}
        self.t.check("get", strict_equal(exp, body), req, {"expected": exp, "got": body})

    def get_missing(self):
        i = self.rng.choice(["d%d" % (self.o.n + self.rng.randrange(10**6)), "nope", "D1", "d01"])
        req = {"method": "GET", "path": f"/collections/{COLL}/docs/{i}"}
        st, body, _ = self.c.request("GET", req["path"])
        code = (body or {}).get("error", {}).get("code") if isinstance(body, dict) else None
        self.t.check("get_404", st == 404 and code == "not_found", req, {"status": st, "body": body})

    # -- count / facet -------------------------------------------------------

    def count(self, f=None):
        f = self.gen.pick() if f is None else f
        body = {} if f is None else {"filter": f}
        req = {"path": f"/collections/{COLL}/count", "body": body}
        st, got, _ = self.post(req["path"], body)
        if self._status("count", req, st, body=got):
            exp = self.o.count(f)
            # The reply may carry more keys (took_us); the contract's are compared.
            self.t.check("count", isinstance(got, dict) and got.get("count") == exp and type(got.get("count")) is int,
                         req, {"expected": exp, "got": got})

    def facet(self):
        f, fld, size = self.gen.pick(), self.rng.choice(["brand", "tags"]), self.rng.choice([10, 10, 10, 3, 50])
        body = {"field": fld, "size": size} | ({} if f is None else {"filter": f})
        req = {"path": f"/collections/{COLL}/facet", "body": body}
        st, got, _ = self.post(req["path"], body)
        if not self._status("facet", req, st, body=got):
            return
        buckets, other = self.o.facet(fld, f, size)
        exp = {"buckets": [{"value": v, "count": c} for v, c in buckets], "other_count": other}
        # The reply may carry more keys (matched, took_us); the contract's are compared.
        got_c = {k: got.get(k) for k in exp} if isinstance(got, dict) else got
        self.t.check("facet", strict_equal(exp, got_c), req, {"expected": exp, "got": got})

    # -- scroll ---------------------------------------------------------------

    def scroll_body(self, f, sort, size, after):
        body = {"sort": sort, "size": size, "fields": True}
        if f is not None:
            body["filter"] = f
        if after is not None:
            body["after"] = after
        return body

    def compare_page(self, op, req, got, hits, nxt):
        """A scroll reply against the oracle's page; returns the ids it holds."""
        gh = got.get("hits") if isinstance(got, dict) else None
        if not isinstance(gh, list):
            self.t.check(op, False, req, {"got": got})
            return []
        exp_ids = [self.o.ids[r] for r, _ in hits]
        got_ids = [h.get("id") for h in gh]
        diff = first_diff(exp_ids, got_ids)
        if diff is None:
            for (r, sv), h in zip(hits, gh):
                if not sort_list_equal(sv, h.get("sort")):
                    diff = {"id": h.get("id"), "expected_sort": sv, "got_sort": h.get("sort")}
                    break
                if "fields" in req["body"] and not strict_equal(stored_fields(self.o.docs[r]), h.get("fields")):
                    diff = {"id": h.get("id"), "expected_fields": stored_fields(self.o.docs[r]),
                            "got_fields": h.get("fields")}
                    break
        if diff is None and "next" in got and not (
                (nxt is None and got["next"] is None) or sort_list_equal(nxt, got["next"])):
            diff = {"expected_next": nxt, "got_next": got.get("next")}
        if diff is None and "next" not in got:
            diff = {"missing": "next"}
        self.t.check(op, diff is None, req, diff)
        return got_ids

    def scroll(self):
        f, sort = self.gen.pick(), self.rng.choice(SCROLL_SORTS)
        size = self.rng.choice([20, 20, 20, 1, 7, 100])
        after = None
        if self.rng.random() < 0.6:
            rows, svs = self.o.sorted_rows(f, self.o.norm_sort(sort))
            if rows:
                after = svs[self.rng.choice(rows)]
        body = self.scroll_body(f, sort, size, after)
        req = {"path": f"/collections/{COLL}/scroll", "body": body}
        st, got, _ = self.post(req["path"], body)
        if self._status("scroll", req, st, body=got):
            hits, nxt = self.o.page(f, sort, size, after)
            self.compare_page("scroll", req, got, hits, nxt)

    def walk(self, name, f, sort, size=20, max_pages=2000):
        """Follow `next` to the end; the concatenation must be the oracle's full order."""
        orders = self.o.norm_sort(sort)
        exp_rows, svs = self.o.sorted_rows(f, orders)
        exp = [self.o.ids[r] for r in exp_rows]
        got, after, pages, err = [], None, 0, None
        while pages < max_pages:
            body = self.scroll_body(f, sort, size, after)
            st, rep, _ = self.post(f"/collections/{COLL}/scroll", body)
            pages += 1
            if st != 200 or not isinstance(rep, dict) or not isinstance(rep.get("hits"), list):
                err = {"page": pages, "status": st, "body": truncate(rep, 400)}
                break
            got += [h.get("id") for h in rep["hits"]]
            after = rep.get("next")
            if after is None:
                break
        ties = sum(1 for a, b in zip(exp_rows, exp_rows[1:]) if svs[a][:-1] == svs[b][:-1]) \
            if orders[-1] == ("id", "asc") and len(orders) > 1 else 0
        diff = err or first_diff(exp, got)
        self.t.check("walk", diff is None, {"walk": name, "filter": f, "sort": sort}, diff)
        self.t.walks.append({"name": name, "sort": sort, "filter": f, "expected": len(exp), "got": len(got),
                             "pages": pages, "tie_pairs": ties, "ok": diff is None})

    # -- vector search ------------------------------------------------------------

    def search(self):
        f = self.gen.pick()
        qi = self.rng.randrange(len(self.q))
        body = {"vector": [float(v) for v in self.q[qi]], "k": K}
        if f is not None:
            body["filter"] = f
        req = {"path": f"/collections/{COLL}/search", "body": {**body, "vector": f"queries[{qi}]"}}
        st, got, _ = self.post(f"/collections/{COLL}/search", body)
        if not self._status("search", req, st, body=got):
            return
        self.judge_knn(req, self.q[qi], f, got)

    def judge_knn(self, req, q, f, got):
        rows, scores, nmatch, m = self.o.knn(q, f, K)
        hits = got.get("hits") if isinstance(got, dict) else None
        if not isinstance(hits, list):
            self.t.check("search", False, req, {"got": got})
            return
        ids = [h.get("id") for h in hits]
        bad = [i for i in ids if i not in self.o.row_of or not m[self.o.row_of[i]]]
        diff = None
        if bad:
            self.t.knn_hard += 1
            diff = {"hits_failing_filter_or_unknown": bad[:5]}
        elif len(set(ids)) != len(ids) or len(ids) > K:
            diff = {"duplicate_or_too_many": ids}
        elif nmatch < K and set(ids) != {self.o.ids[r] for r in rows}:
            diff = {"expected_exactly": sorted(self.o.ids[r] for r in rows), "got": sorted(ids)}
        if diff is None and nmatch:
            self.t.recall.append((nmatch / self.o.n, self.recall_of(ids, q, scores)))
        self.t.check("search", diff is None, req, diff)

    def recall_of(self, ids, q, scores):
        """Tie-aware recall@K: a hit counts when its exact score >= the K-th exact score - 1e-5."""
        want = min(K, len(scores))
        if want == 0:
            return 1.0
        kth = scores[want - 1]
        qn = np.asarray(q, np.float64) / np.linalg.norm(q)
        true = [float(self.o.x[self.o.row_of[i]] @ qn) for i in ids]
        return min(1.0, sum(1 for s in true if s >= kth - 1e-5) / want)

    # -- Elasticsearch-shaped reads ---------------------------------------------------

    def es_search(self):
        f, sort = self.gen.pick(), self.rng.choice(ES_SORTS)
        size = self.rng.choice([20, 20, 5, 0])
        body = {"sort": sort, "size": size, "track_total_hits": True,
                "aggs": {"b": {"terms": {"field": self.rng.choice(["brand", "tags"]), "size": 10}}}}
        if f is not None:
            body["query"] = f
        if self.rng.random() < 0.5:
            rows, svs = self.o.sorted_rows(f, self.o.norm_sort(sort))
            if rows:
                body["search_after"] = svs[self.rng.choice(rows)]
        elif self.rng.random() < 0.3:
            body["from"] = self.rng.choice([20, 40, 100])
        req = {"path": f"/{COLL}/_search", "body": body}
        st, got, _ = self.post(req["path"], body)
        if self._status("es_search", req, st, body=got):
            self.t.check("es_search", *self.es_search_diff(body, f, got, req))

    def es_search_diff(self, body, f, got, req):
        frm = body.get("from", 0)
        hits, _ = self.o.page(f, body["sort"], frm + body["size"], body.get("search_after"))
        hits = hits[frm:]
        try:
            h = got["hits"]
            if h["total"] != {"value": self.o.count(f), "relation": "eq"}:
                return False, req, {"expected_total": self.o.count(f), "got": h["total"]}
            gh = h["hits"]
            d = first_diff([self.o.ids[r] for r, _ in hits], [x.get("_id") for x in gh])
            if d:
                return False, req, d
            for (r, sv), x in zip(hits, gh):
                if not sort_list_equal(sv, x.get("sort")) or not strict_equal(stored_fields(self.o.docs[r]),
                                                                                x.get("_source")):
                    return False, req, {"_id": x.get("_id"), "expected_sort": sv, "got": truncate(x, 600)}
            a = body["aggs"]["b"]["terms"]
            bk, other = self.o.facet(a["field"], f, a["size"])
            exp = {"buckets": [{"key": v, "doc_count": c} for v, c in bk], "sum_other_doc_count": other}
            gb = got["aggregations"]["b"]
            gb = {"buckets": [{"key": x["key"], "doc_count": x["doc_count"]} for x in gb["buckets"]],
                  "sum_other_doc_count": gb["sum_other_doc_count"]}
            return strict_equal(exp, gb), req, {"expected_aggs": exp, "got_aggs": gb}
        except (KeyError, TypeError) as e:
            return False, req, {"shape": repr(e), "got": truncate(got, 800)}

    def es_count(self):
        f = self.gen.pick()
        body = {} if f is None else {"query": f}
        st, got, _ = self.post(f"/{COLL}/_count", body)
        req = {"path": f"/{COLL}/_count", "body": body}
        if self._status("es_count", req, st, body=got):
            exp = self.o.count(f)
            ok = isinstance(got, dict) and got.get("count") == exp
            self.t.check("es_count", ok, req, {"expected": exp, "got": got})

    def es_doc(self):
        missing = self.rng.random() < 0.25
        i = "zz%d" % self.rng.randrange(1000) if missing else self.rng.choice(self.o.ids)
        req = {"method": "GET", "path": f"/{COLL}/_doc/{i}"}
        st, got, _ = self.c.request("GET", req["path"])
        if missing:
            ok = st == 404 and isinstance(got, dict) and got.get("found") is False
        else:
            exp = {"_id": i, "found": True, "_source": stored_fields(self.o.docs[self.o.row_of[i]])}
            ok = st == 200 and isinstance(got, dict) and all(strict_equal(v, got.get(k)) for k, v in exp.items())
        self.t.check("es_doc", ok, req, {"status": st, "got": got})

    def es_mget(self):
        ids = self.rng.sample(self.o.ids, self.rng.randint(1, 6)) + ["zz%d" % self.rng.randrange(99)]
        self.rng.shuffle(ids)
        req = {"path": f"/{COLL}/_mget", "body": {"ids": ids}}
        st, got, _ = self.post(req["path"], req["body"])
        if not self._status("es_mget", req, st, body=got):
            return
        ok = isinstance(got, dict) and isinstance(got.get("docs"), list) and len(got["docs"]) == len(ids)
        for i, d in zip(ids, got.get("docs", []) if ok else []):
            r = self.o.row_of.get(i)
            want = {"_id": i, "found": r is not None}
            ok = ok and all(d.get(k) == v for k, v in want.items())
            if r is not None:
                ok = ok and strict_equal(stored_fields(self.o.docs[r]), d.get("_source"))
        self.t.check("es_mget", ok, req, {"got": got})


MIX = [("get", 12), ("get_missing", 3), ("count", 15), ("facet", 15), ("scroll", 25), ("search", 20),
       ("es_search", 5), ("es_count", 2), ("es_doc", 2), ("es_mget", 1)]


def run_mix(ck, n):
    names, weights = zip(*MIX)
    fn = {"get": ck.get_doc, "get_missing": ck.get_missing}
    for i in range(n):
        name = ck.rng.choices(names, weights)[0]
        (fn[name] if name in fn else getattr(ck, name))()
        if (i + 1) % 500 == 0:
            log(f"mix: {i + 1}/{n} requests, {ck.t.total_mismatched()} mismatches")


WALKS = [
    ("all, price desc + created asc", None, [{"price": "desc"}, {"created": "asc"}]),
    ("exists brand, stock asc", {"exists": {"field": "brand"}}, [{"stock": "asc"}]),
    ("all, id", None, ["id"]),
    ("active false, tags asc (min)", {"term": {"active": False}}, [{"tags": "asc"}]),
    ("stock >= 0, tags desc (max) + price asc", {"range": {"stock": {"gte": 0}}}, [{"tags": "desc"}, {"price": "asc"}]),
    ("not b000, brand asc + created desc", {"bool": {"must_not": [{"term": {"brand": "b000"}}]}},
     [{"brand": "asc"}, {"created": "desc"}]),
    ("should t0|t1|t2, price asc (ties)", {"bool": {"should": [{"term": {"tags": "t0"}}, {"term": {"tags": "t1"}},
                                                               {"term": {"tags": "t2"}}]}}, [{"price": "asc"}]),
]


# ----------------------------------------------------------------------------- bad inputs

def deep_bool(levels, leaf=None):
    f = leaf or {"term": {"brand": "b001"}}
    for _ in range(levels):
        f = {"bool": {"must": [f]}}
    return f


def bad_inputs():
    """(name, method, path, body, tokens one of which the error message must contain)."""
    c, s = f"/collections/{COLL}", f"/{COLL}"
    return [
        ("unknown field", "POST", f"{c}/count", {"filter": {"term": {"colour": "red"}}}, ["colour"]),
        ("range on keyword", "POST", f"{c}/count", {"filter": {"range": {"brand": {"gte": "b1"}}}}, ["brand"]),
        ("term with object value", "POST", f"{c}/count", {"filter": {"term": {"brand": {"bogus": 1}}}},
         ["brand", "bogus"]),
        ("malformed date", "POST", f"{c}/count", {"filter": {"range": {"created": {"gte": "2024-13-45T99:00:00Z"}}}},
         ["created", "2024-13-45"]),
        ("cursor too short (1 of 2 values)", "POST", f"{c}/scroll",
         {"sort": [{"price": "desc"}], "size": 20, "after": [50.0]}, ["after", "cursor"]),
        ("cursor too long (3 of 2 values)", "POST", f"{c}/scroll",
         {"sort": [{"price": "desc"}], "size": 20, "after": [50.0, "d1", 3]}, ["after", "cursor"]),
        ("size over cap", "POST", f"{c}/scroll", {"sort": ["id"], "size": SIZE_CAP + 1}, ["size"]),
        ("facet on float field", "POST", f"{c}/facet", {"field": "price", "size": 10}, ["price"]),
        ("bool nested 40 deep", "POST", f"{c}/count", {"filter": deep_bool(40)}, ["depth", "deep", "nest", "32"]),
        ("unknown clause", "POST", f"{c}/count", {"filter": {"termz": {"brand": "b001"}}}, ["termz"]),
        ("unknown sort field", "POST", f"{c}/scroll", {"sort": [{"weight": "asc"}], "size": 5}, ["weight"]),
        ("search filter unknown field", "POST", f"{c}/search", {"vector": [1.0] + [0.0] * 63, "k": 10,
                                                                 "filter": {"exists": {"field": "colour"}}}, ["colour"]),
        ("es: avg aggregation", "POST", f"{s}/_search", {"aggs": {"x": {"avg": {"field": "price"}}}}, ["avg"]),
        ("es: script_fields", "POST", f"{s}/_search",
         {"script_fields": {"p2": {"script": "doc['price'].value * 2"}}}, ["script_fields"]),
        ("es: from + size over 10000", "POST", f"{s}/_search", {"from": 9995, "size": 10}, ["from", "size", "10000"]),
    ]


def run_bad_inputs(client, tally, dim):
    for name, method, path, body, tokens in bad_inputs():
        if path.endswith("/search") and "vector" in body:
            body = {**body, "vector": [1.0] + [0.0] * (dim - 1)}
        st, got, raw = client.request(method, path, body)
        err = got.get("error") if isinstance(got, dict) else None
        code = err.get("code") if isinstance(err, dict) else None
        msg = err.get("message", "") if isinstance(err, dict) else ""
        named = any(t.lower() in str(msg).lower() for t in tokens)
        ok = st == 400 and code == "invalid_argument" and named
        tally.bad_inputs.append({"name": name, "path": path, "status": st, "code": code,
                                 "message": str(msg)[:200] if err else raw[:200], "wants": tokens, "pass": ok})


# ----------------------------------------------------------------------------- server lifecycle

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def help_text(binary, sub):
    try:
        return subprocess.run([binary, sub, "--help"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ""


def ensure_binary(path):
    if path:
        return str(Path(path).resolve())
    b = ROOT / "target" / "release" / "searchd"
    if not b.exists():
        log("building target/release/searchd")
        subprocess.check_call(["cargo", "build", "--release", "-p", "searchd-cli"], cwd=ROOT)
    return str(b)


class Server:
    """`searchd serve` on a free loopback port; stopped by pid (TERM, then KILL) on exit."""

    def __init__(self, binary, coll_dir, log_path, extra=()):
        self.binary, self.dir, self.log_path, self.extra = binary, coll_dir, log_path, list(extra)
        self.port, self.proc = free_port(), None

    def __enter__(self):
        flag = "--listen" if "--listen" in help_text(self.binary, "serve") else "--addr"
        cmd = [self.binary, "serve", "--collection", f"{COLL}={self.dir}", flag, f"127.0.0.1:{self.port}"]
        cmd += self.extra
        log("serve: " + " ".join(cmd[1:]))
        self.logf = open(self.log_path, "w")
        self.proc = subprocess.Popen(cmd, stdout=self.logf, stderr=subprocess.STDOUT)
        self.wait_health()
        return self

    def wait_health(self, timeout=180):
        t0 = time.time()
        while time.time() - t0 < timeout:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode}; see {self.log_path}")
            try:
                # /ready: every collection open (/health answers while a large one still opens).
                st, _, _ = Client("127.0.0.1", self.port, timeout=2).request("GET", "/ready")
                if st == 200:
                    return
            except OSError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"no /ready 200 after {timeout}s; see {self.log_path}")

    def __exit__(self, *exc):
        self.stop()

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc:
            self.logf.close()


LEAN_DOCS = 200_000
LEAN_CHUNK = 50_000


def lean_corpus(n, seed, dim, path):
    """The corpus of `n` documents written to `path` in chunks of LEAN_CHUNK (each chunk's
    vectors from its own seed); returns the first chunk's documents."""
    path.parent.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    bw, tw = zipf_weights(N_BRANDS), zipf_weights(N_TAGS, 1.0)
    first = None
    with path.open("w") as out:
        for start in range(0, n, LEAN_CHUNK):
            m = min(LEAN_CHUNK, n - start)
            vecs = make_vectors(m, dim, seed * 1_000_003 + start)
            docs = [make_doc(start + i, rng, vecs[i], bw, tw) for i in range(m)]
            out.write(corpus_jsonl(docs))
            first = first if first is not None else docs
            log(f"corpus: {start + m:,} of {n:,} documents")
    return first or []


def ingest(binary, docs, work, force=True):
    """Write the corpus and ingest it; returns (collection dir, ingest report or None)."""
    work.mkdir(parents=True, exist_ok=True)
    corpus = work / "corpus.jsonl"
    corpus.write_text(corpus_jsonl(docs))
    return ingest_file(binary, work)


def ingest_file(binary, work, threads=1):
    """Ingest `work`/corpus.jsonl into `work`/coll."""
    corpus = work / "corpus.jsonl"
    out, rep = work / "coll", work / "ingest.json"
    cmd = [binary, "ingest", "--docs", str(corpus), "--out", str(out), "--vector-field", "vec",
           "--force", "--json", str(rep), "--build-threads", str(threads)]
    log("ingest: " + " ".join(cmd[1:]))
    p = subprocess.run(cmd, capture_output=True, text=True)
    (work / "ingest.log").write_text(p.stdout + p.stderr)
    if p.returncode != 0:
        raise RuntimeError(f"ingest failed ({p.returncode}): {(p.stdout + p.stderr)[-1500:]}")
    return out, (json.loads(rep.read_text()) if rep.exists() else None)


def install_signal_handlers():
    def stop(signum, _frame):
        raise KeyboardInterrupt(f"signal {signum}")
    signal.signal(signal.SIGTERM, stop)


# ----------------------------------------------------------------------------- report

def bucket_of(sel):
    for hi, name in BUCKETS:
        if sel < hi:
            return name
    return BUCKETS[-1][1]


def recall_table(samples):
    rows = {name: [] for _, name in BUCKETS}
    for sel, r in samples:
        rows[bucket_of(sel)].append(r)
    out = {name: {"queries": len(v), "mean_recall": (sum(v) / len(v)) if v else None,
                  "floor_applies": len(v) >= 20,
                  "pass": (len(v) < 20) or (sum(v) / len(v) >= RECALL_FLOOR)} for name, v in rows.items()}
    allr = [r for _, r in samples]
    out["overall"] = {"queries": len(allr), "mean_recall": (sum(allr) / len(allr)) if allr else None,
                      "floor_applies": True, "pass": bool(allr) and sum(allr) / len(allr) >= RECALL_FLOOR}
    return out


def verdict(t):
    rec = recall_table(t.recall)
    failures = []
    if t.total_mismatched():
        failures.append(f"{t.total_mismatched()} mismatches")
    if t.knn_hard:
        failures.append(f"{t.knn_hard} kNN replies with hits failing the filter")
    failures += [f"recall {k}: {v['mean_recall']}" for k, v in rec.items() if not v["pass"]]
    failures += [f"bad input: {b['name']}" for b in t.bad_inputs if not b["pass"]]
    return rec, failures


def write_report(t, args, extra, json_path, md_path):
    rec, failures = verdict(t)
    doc = {"schema": SCHEMA, "config": {"docs": args.docs, "seed": args.seed, "dim": args.dim,
                                        "requests": args.requests, "k": K, "recall_floor": RECALL_FLOOR},
           **extra, "operations": t.ops, "recall": rec, "knn_hits_failing_filter": t.knn_hard,
           "walks": t.walks, "bad_inputs": t.bad_inputs, "mismatches": t.mismatches,
           "notes": t.notes, "failures": failures, "pass": not failures}
    Path(json_path).parent.mkdir(parents=True, exist_ok=True)
    Path(json_path).write_text(json.dumps(doc, indent=1) + "\n")
    Path(md_path).write_text(markdown(doc))
    return doc


def markdown(d):
    c = d["config"]
    out = [f"# fields oracle: {c['docs']} docs, seed {c['seed']}, dim {c['dim']}, {c['requests']} requests", "",
           f"**{'PASS' if d['pass'] else 'FAIL'}**" + ("" if d["pass"] else ": " + "; ".join(d["failures"][:8])), "",
           "| operation | checked | mismatched |", "|---|---:|---:|"]
    out += [f"| {k} | {v['checked']} | {v['mismatched']} |" for k, v in sorted(d["operations"].items())]
    out += ["", f"## Filtered kNN recall@{c['k']} (tie-aware; floor {c['recall_floor']} where >= 20 queries)", "",
            "| selectivity | queries | mean recall | pass |", "|---|---:|---:|---|"]
    for k, v in d["recall"].items():
        mr = "-" if v["mean_recall"] is None else f"{v['mean_recall']:.4f}"
        out.append(f"| {k} | {v['queries']} | {mr} | {'yes' if v['pass'] else 'NO'} |")
    out += ["", f"Hits failing the filter: {d['knn_hits_failing_filter']}", "", "## Cursor walks", "",
            "| walk | expected | got | pages | tie pairs | ok |", "|---|---:|---:|---:|---:|---|"]
    out += [f"| {w['name']} | {w['expected']} | {w['got']} | {w['pages']} | {w['tie_pairs']} | "
            f"{'yes' if w['ok'] else 'NO'} |" for w in d["walks"]]
    out += ["", "## Bad inputs (400 invalid_argument naming the offender)", "",
            "| case | status | code | message | pass |", "|---|---:|---|---|---|"]
    out += [f"| {b['name']} | {b['status']} | {b['code']} | {str(b['message'])[:80].replace('|', '/')} | "
            f"{'yes' if b['pass'] else 'NO'} |" for b in d["bad_inputs"]]
    if d["mismatches"]:
        out += ["", "## First mismatches", ""]
        out += [f"- `{m['op']}` {json.dumps(m['request'])[:300]} -> {json.dumps(m['diff'])[:400]}"
                for m in d["mismatches"][:10]]
    return "\n".join(out) + "\n"


def print_summary(d):
    print(f"fields oracle: {'PASS' if d['pass'] else 'FAIL'}")
    for k, v in sorted(d["operations"].items()):
        print(f"  {k:12s} checked {v['checked']:5d}  mismatched {v['mismatched']:5d}")
    for k, v in d["recall"].items():
        mr = "-" if v["mean_recall"] is None else f"{v['mean_recall']:.4f}"
        print(f"  recall {k:8s} n={v['queries']:4d} mean={mr} {'ok' if v['pass'] else 'MISS'}")
    bi = d["bad_inputs"]
    print(f"  bad inputs: {sum(b['pass'] for b in bi)}/{len(bi)} pass: "
          + ", ".join(b["name"] for b in bi if not b["pass"]))
    for f in d["failures"][:10]:
        print(f"  FAIL {f}")


# ----------------------------------------------------------------------------- full oracle run

def run_checks(client, oracle, args, queries):
    """The whole comparison on one client (real or fake); returns the tally."""
    t = Tally()
    rng = random.Random(args.seed * 1000 + 1)
    ck = Checker(client, oracle, t, rng, queries)
    for name, f, sort in WALKS:
        log(f"walk: {name}")
        ck.walk(name, f, sort)
    for f in ck.gen.anchors():
        ck.count(f)
    run_mix(ck, args.requests)
    run_bad_inputs(client, t, args.dim)
    return t


def oracle_main(args, binary):
    docs = make_corpus(args.docs, args.seed, args.dim)
    oracle = Oracle(docs)
    queries = make_queries(max(50, args.requests // 4), args.dim, args.seed)
    work = Path(args.work)
    coll, rep = ingest(binary, docs, work)
    with Server(binary, coll, work / "serve.log") as srv:
        t = run_checks(Client("127.0.0.1", srv.port), oracle, args, queries)
    t.notes.append(f"schema inferred by the oracle: {oracle.schema}")
    d = write_report(t, args, {"ingest_report": rep, "binary": binary}, args.json, args.md)
    print_summary(d)
    return 0 if d["pass"] else 1


# ----------------------------------------------------------------------------- reads under load

READ_MIX = [("get", 30), ("page", 20), ("after", 20), ("facet", 15), ("count", 15)]
TARGET_P95_MS = {"get": 2.0, "count": 2.0, "facet": 2.0, "page": 5.0, "after": 5.0}


def read_line(method, path, body=None):
    return f"{method} {path}" + ("" if body is None else " " + json.dumps(body, separators=(",", ":")))


def parse_read_line(line):
    method, rest = line.split(" ", 1)
    path, _, body = rest.partition(" ")
    return method, path, (json.loads(body) if body else None)


def load_filters(gen):
    """Moderately selective filters for the page/after/facet/count read files."""
    r = gen.rng
    return [gen.random() if r.random() < 0.5 else r.choice(gen.anchors()) for _ in range(64)]


def make_read_files(client, oracle, out_dir, seed, lines=200):
    """Five mix files; `after` cursors are the `next` of real pages fetched from the server."""
    rng = random.Random(seed * 7919)
    gen = FilterGen(oracle.docs, rng)
    fl = load_filters(gen)
    c = f"/collections/{COLL}"
    files = {"get": [read_line("GET", f"{c}/docs/{rng.choice(oracle.ids)}") for _ in range(lines)]}
    pages = [{"filter": rng.choice(fl), "sort": rng.choice(SCROLL_SORTS), "size": 20} for _ in range(lines)]
    files["page"] = [read_line("POST", f"{c}/scroll", b) for b in pages]
    files["after"] = []
    for b in pages:
        cur, depth = dict(b), rng.randint(1, 5)
        for _ in range(depth):
            st, rep, _ = client.request("POST", f"{c}/scroll", cur)
            nxt = rep.get("next") if st == 200 and isinstance(rep, dict) else None
            if nxt is None:
                break
            cur = {**b, "after": nxt}
        if "after" in cur:
            files["after"].append(read_line("POST", f"{c}/scroll", cur))
    if not files["after"]:
        raise RuntimeError("no cursor from the server's scroll pages")
    files["facet"] = [read_line("POST", f"{c}/facet", {"field": rng.choice(["brand", "tags"]),
                                                        "filter": rng.choice(fl), "size": 10}) for _ in range(lines)]
    files["count"] = [read_line("POST", f"{c}/count", {"filter": rng.choice(fl)}) for _ in range(lines)]
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name, ls in files.items():
        paths[name] = out_dir / f"reads-{name}.txt"
        paths[name].write_text("\n".join(ls) + "\n")
    return paths


def endpoint_latencies(ep):
    """p50/p95/p99 in ms from one endpoint entry, whatever its units (us keys or latency_ms)."""
    out = {}
    for p in ("p50", "p95", "p99"):
        if f"{p}_us" in ep and ep[f"{p}_us"] is not None:
            out[p] = ep[f"{p}_us"] / 1000.0
        elif f"{p}_ms" in ep:
            out[p] = ep[f"{p}_ms"]
        elif isinstance(ep.get("latency_ms"), dict):
            out[p] = ep["latency_ms"].get(p)
        else:
            out[p] = None
    out["count"] = ep.get("count", ep.get("requests"))
    errs = ep.get("errors", 0)
    out["errors"] = sum(errs.values()) if isinstance(errs, dict) else errs
    return out


def parse_load_report(rep):
    """{concurrency: {endpoint: latencies}} from a searchd.load.v1 report with per-endpoint steps."""
    cells = {}
    for step in rep.get("steps", []) if isinstance(rep, dict) else []:
        eps = step.get("endpoints")
        if not isinstance(eps, dict):
            log(f"load report step without `endpoints`; step keys: {sorted(step)}")
            continue
        cells[step.get("concurrency")] = {n: endpoint_latencies(e) for n, e in eps.items() if isinstance(e, dict)}
    if not cells:
        log(f"load report keys: {sorted(rep) if isinstance(rep, dict) else type(rep)}")
    return cells


def run_load(binary, url, files, cache, out_json, args):
    mix = ",".join(f"{n}={files[n]}:{w}" for n, w in READ_MIX)
    cmd = [binary, "load", "--url", url, "--mix", mix, "--ramp", "1,8", "--cache", cache,
           "--warmup", args.load_warmup, "--duration", args.load_duration, "--slo-p99-ms", "1000",
           "--json", str(out_json), "--quiet"]
    log("load: " + " ".join(cmd[1:]))
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0 or not out_json.exists():
        raise RuntimeError(f"searchd load failed ({p.returncode}): {(p.stdout + p.stderr)[-1200:]}")
    return parse_load_report(json.loads(out_json.read_text()))


def judge_cells(cells):
    """Targets at 8 clients, cache cold: p95 per operation, and no errors."""
    fails = []
    for c in cells:
        if c["clients"] != 8 or c["cache"] != "cold":
            continue
        for op, lat in c["endpoints"].items():
            tgt = TARGET_P95_MS.get(op)
            ok = tgt is not None and lat["p95"] is not None and lat["p95"] <= tgt and not lat["errors"]
            lat["target_p95_ms"], lat["pass"] = tgt, ok
            if not ok:
                fails.append(f"{c['server']} {op}: p95 {lat['p95']} ms (target {tgt}), errors {lat['errors']}")
        missing = set(TARGET_P95_MS) - set(c["endpoints"])
        fails += [f"{c['server']} {op}: not reported" for op in sorted(missing)]
    return fails


def reads_markdown(d):
    out = ["# fields reads under load (searchd load --mix)", "",
           f"**{'PASS' if d['pass'] else 'FAIL'}**" + ("" if d["pass"] else ": " + "; ".join(d["failures"][:8])),
           "", "Targets at 8 clients, cache cold: p95 <= 2 ms get/count/facet, <= 5 ms page/after.", "",
           "| server | clients | cache | op | n | err | p50 ms | p95 ms | p99 ms | target |",
           "|---|---:|---|---|---:|---:|---:|---:|---:|---|"]

    def f(x):
        return "-" if x is None else f"{x:.3f}"
    for c in d["cells"]:
        for op, lat in sorted(c["endpoints"].items()):
            tgt = "" if "pass" not in lat else ("pass" if lat["pass"] else "FAIL")
            out.append(f"| {c['server']} | {c['clients']} | {c['cache']} | {op} | {lat['count']} | {lat['errors']} | "
                       f"{f(lat['p50'])} | {f(lat['p95'])} | {f(lat['p99'])} | {tgt} |")
    return "\n".join(out + [""] + [f"- {n}" for n in d["notes"]]) + "\n"


def reads_main(args, binary):
    lh, sh = help_text(binary, "load"), help_text(binary, "serve")
    missing = [f for f, h in (("load --mix", lh), ("load --cache", lh)) if f.split()[1] not in h]
    if missing:
        log(f"this searchd lacks {missing}; cannot run the reads under load")
        return 2
    work = Path(args.work)
    coll = work / "coll"
    if args.docs > LEAN_DOCS:
        # Beyond LEAN_DOCS the corpus is written in chunks and only the first chunk is kept
        # in Python, for the read files' filters (values, ids); the oracle over 1M documents
        # would need ~20 GB. The reads under load compare nothing with the oracle.
        sample = lean_corpus(args.docs, args.seed, args.dim, work / "corpus.jsonl")
        oracle = Oracle(sample)
        coll, _ = ingest_file(binary, work, threads=2)
    else:
        docs = make_corpus(args.docs, args.seed, args.dim)
        oracle = Oracle(docs)
        if not coll.exists() or args.skip_oracle:
            coll, _ = ingest(binary, docs, work)
    notes = []
    if args.search_threads:
        # The search-threads sweep: the same mix against servers with each pool size.
        servers = [(f"threads-{n}", ["--search-threads", str(n)]) for n in args.search_threads.split(",")]
        notes.append(f"search-threads sweep on a {os.cpu_count()}-core machine, no response cache")
    else:
        servers = [("no-cache", [])]
        if "--cache-bytes" in sh:
            servers.append(("cache-64MiB", ["--cache-bytes", "64MiB"]))
        else:
            notes.append("serve has no --cache-bytes: only the server without a response cache was run")
    cells, files = [], None
    for sname, extra in servers:
        with Server(binary, coll, work / f"serve-{sname}.log", extra) as srv:
            url = f"http://127.0.0.1:{srv.port}"
            files = files or make_read_files(Client("127.0.0.1", srv.port), oracle, work, args.seed)
            for cache in ("cold", "warm"):
                got = run_load(binary, url, files, cache, work / f"load-{sname}-{cache}.json", args)
                cells += [{"server": sname, "clients": cl, "cache": cache, "endpoints": eps}
                          for cl, eps in sorted(got.items())]
    fails = judge_cells(cells)
    d = {"schema": READS_SCHEMA, "config": {"docs": args.docs, "seed": args.seed, "warmup": args.load_warmup,
                                            "duration": args.load_duration, "mix": READ_MIX},
         "targets_p95_ms_8_clients_cold": TARGET_P95_MS, "cells": cells, "notes": notes,
         "failures": fails, "pass": not fails and bool(cells)}
    jp = Path(args.reads_json)
    jp.parent.mkdir(parents=True, exist_ok=True)
    jp.write_text(json.dumps(d, indent=1) + "\n")
    Path(args.reads_md).write_text(reads_markdown(d))
    print(reads_markdown(d))
    return 0 if d["pass"] else 1


# ----------------------------------------------------------------------------- self-test

HAND_DOCS = [
    {"id": "a", "k": "x", "n": [1, 50], "f": 1.5, "dt": "2024-01-01T00:00:00Z", "b": True},
    {"id": "b", "k": ["x", "y", "x"], "n": 15, "f": 2.5, "dt": "2024-01-02T00:00:00Z", "b": False},
    {"id": "c", "k": [], "n": None, "f": 1.5, "dt": "2024-01-01T00:00:00Z", "b": True},
    {"id": "d", "k": "y", "n": [12, 30], "dt": "2023-12-31T23:00:00Z", "b": False},
    {"id": "e", "k": None, "n": 7, "f": 0.5, "b": True},
    {"id": "aa", "k": "z", "n": 15, "f": 1.5, "dt": "2024-01-02T00:00:00Z", "b": True},
]


class SelfTest:
    def __init__(self):
        self.failed = 0
        self.passed = 0

    def eq(self, name, got, want):
        if got == want:
            self.passed += 1
        else:
            self.failed += 1
            print(f"  FAIL {name}: got {got!r}, want {want!r}")

    def ids(self, o, f):
        return sorted(o.ids[i] for i in np.flatnonzero(o.mask(f)))


def st_generator(T):
    a, b = make_corpus(2000, 7, 16), make_corpus(2000, 7, 16)
    T.eq("corpus deterministic", corpus_jsonl(a) == corpus_jsonl(b), True)
    T.eq("seed changes corpus", corpus_jsonl(a) == corpus_jsonl(make_corpus(2000, 8, 16)), False)
    g1, g2 = FilterGen(a, random.Random(3)), FilterGen(a, random.Random(3))
    T.eq("filters deterministic", [g1.pick() for _ in range(200)] == [g2.pick() for _ in range(200)], True)
    T.eq("queries deterministic", bool((make_queries(5, 16, 7) == make_queries(5, 16, 7)).all()), True)
    n = len(a)
    T.eq("brand missing ~10%", 0.07 < sum("brand" not in d for d in a) / n < 0.13, True)
    T.eq("price missing ~5%", 0.03 < sum("price" not in d for d in a) / n < 0.07, True)
    T.eq("stock zeros ~30%", 0.26 < sum(d["stock"] == 0 for d in a) / n < 0.34, True)
    T.eq("stock is int", all(type(d["stock"]) is int and 0 <= d["stock"] <= 500 for d in a), True)
    T.eq("tags 0..4", all(0 <= len(d["tags"]) <= 4 for d in a), True)
    T.eq("created RFC 3339", all(RFC3339.match(d["created"]) for d in a), True)
    T.eq("unit vectors", all(abs(math.sqrt(sum(v * v for v in d["vec"])) - 1) < 1e-4 for d in a), True)
    T.eq("price ties exist", len({d.get("price") for d in a}) < n / 2, True)
    T.eq("created ties exist", len({d["created"] for d in a}) < n, True)
    T.eq("price values are floats", all(type(d["price"]) is float for d in a if "price" in d), True)
    s = infer_schema(a)
    T.eq("schema inference", s, {"text": "text", "brand": "keyword", "price": "float", "stock": "integer",
                                 "tags": "keyword", "active": "bool", "created": "datetime"})


def st_filters(T):
    o = Oracle(HAND_DOCS)
    T.eq("hand schema", o.schema, {"k": "keyword", "n": "integer", "f": "float", "dt": "datetime", "b": "bool"})
    T.eq("term on array", T.ids(o, {"term": {"k": "x"}}), ["a", "b"])
    T.eq("range one element in all bounds", T.ids(o, {"range": {"n": {"gte": 10, "lte": 20}}}), ["aa", "b", "d"])
    T.eq("range gt/lt exclusive", T.ids(o, {"range": {"n": {"gt": 15, "lt": 50}}}), ["d"])
    T.eq("exists: [] and null missing", T.ids(o, {"exists": {"field": "k"}}), ["a", "aa", "b", "d"])
    T.eq("exists: absent missing", T.ids(o, {"exists": {"field": "f"}}), ["a", "aa", "b", "c", "e"])
    T.eq("term bool", T.ids(o, {"term": {"b": False}}), ["b", "d"])
    T.eq("term float", T.ids(o, {"term": {"f": 1.5}}), ["a", "aa", "c"])
    T.eq("datetime range", T.ids(o, {"range": {"dt": {"gte": "2024-01-01T00:00:00Z", "lt": "2024-01-02T00:00:00Z"}}}),
         ["a", "c"])
    T.eq("datetime offset bound", T.ids(o, {"range": {"dt": {"lte": "2024-01-01T00:00:00+01:00"}}}), ["d"])
    T.eq("ids", T.ids(o, {"ids": {"values": ["a", "zz", "e"]}}), ["a", "e"])
    T.eq("only should needs one", T.ids(o, {"bool": {"should": [{"term": {"k": "y"}}, {"term": {"n": 7}}]}}),
         ["b", "d", "e"])
    T.eq("should with must optional", T.ids(o, {"bool": {"must": [{"term": {"b": True}}],
                                                         "should": [{"term": {"k": "y"}}]}}), ["a", "aa", "c", "e"])
    T.eq("msm 2", T.ids(o, {"bool": {"should": [{"term": {"k": "x"}}, {"term": {"k": "y"}}, {"term": {"b": True}}],
                                     "minimum_should_match": 2}}), ["a", "b"])
    T.eq("msm 0 only should", T.ids(o, {"bool": {"should": [{"term": {"k": "q"}}], "minimum_should_match": 0}}),
         sorted(o.ids))
    T.eq("must_not", T.ids(o, {"bool": {"must_not": [{"exists": {"field": "dt"}}]}}), ["e"])
    T.eq("empty bool all", T.ids(o, {"bool": {}}), sorted(o.ids))
    T.eq("filter ctx", T.ids(o, {"bool": {"filter": [{"term": {"f": 1.5}}], "must_not": [{"term": {"k": "z"}}]}}),
         ["a", "c"])
    for name, bad in [("unknown field", {"term": {"zz": 1}}), ("range keyword", {"range": {"k": {"gte": "a"}}}),
                      ("term object", {"term": {"k": {"x": 1}}}), ("bad date", {"range": {"dt": {"gte": "2024-13-01"}}}),
                      ("unknown clause", {"termz": {"k": "x"}}), ("deep bool", deep_bool(33, {"term": {"k": "x"}})),
                      ("term type", {"term": {"n": "7"}})]:
        try:
            o.mask(bad)
            T.eq(f"rejects {name}", "accepted", "BadRequest")
        except BadRequest:
            T.passed += 1
    o.mask(deep_bool(32, {"term": {"k": "x"}}))
    T.passed += 1


def st_naive_agreement(T):
    docs = make_corpus(1500, 11, 8)
    o = Oracle(docs)
    gen = FilterGen(docs, random.Random(5))
    bad, sels = 0, []
    for _ in range(400):
        f = gen.pick()
        m = o.mask(f)
        sels.append(m.mean())
        naive = np.array([naive_match(d, f, o.schema) for d in docs])
        if not (m == naive).all():
            bad += 1
            if bad <= 2:
                print(f"  mask/naive disagree on {json.dumps(f)[:200]}")
    T.eq("mask == naive on 400 random filters", bad, 0)
    T.eq("selectivities span 0.1%..90%", (min(sels) <= 0.002, max(sels) >= 0.9), (True, True))
    T.eq("anchors span", sorted(round(o.count(f) / o.n, 3) for f in gen.anchors())[0] <= 0.01, True)
    for fld in ("brand", "tags"):
        f = gen.random()
        rows = np.flatnonzero(o.mask(f)).tolist()
        T.eq(f"facet {fld} == naive", o.facet(fld, f, 10), naive_facet(docs, rows, fld, 10))


def st_sort(T):
    o = Oracle(HAND_DOCS)
    page = lambda s, size=10, after=None: [o.ids[r] for r, _ in o.page(None, s, size, after)[0]]  # noqa: E731
    T.eq("asc missing last, id ties", page([{"f": "asc"}]), ["e", "a", "aa", "c", "b", "d"])
    T.eq("desc missing last", page([{"f": "desc"}]), ["b", "a", "aa", "c", "e", "d"])
    T.eq("array min asc", page([{"n": "asc"}]), ["a", "e", "d", "aa", "b", "c"])
    T.eq("array max desc", page([{"n": "desc"}]), ["a", "d", "aa", "b", "e", "c"])
    T.eq("keyword desc (max)", page([{"k": "desc"}]), ["aa", "b", "d", "a", "c", "e"])
    T.eq("ids bytewise", page(["id"]), ["a", "aa", "b", "c", "d", "e"])
    T.eq("id desc no extra key", o.norm_sort([{"id": "desc"}]), [("id", "desc")])
    T.eq("datetime sort value ms", o.page(None, [{"dt": "asc"}], 1)[0][0][1], [1704063600000, "d"])
    hits, nxt = o.page(None, [{"f": "asc"}], 2)
    T.eq("next = last sort when full", nxt, [1.5, "a"])
    T.eq("after cursor", page([{"f": "asc"}], 2, nxt), ["aa", "c"])
    T.eq("after null cursor", page([{"f": "asc"}], 5, [None, "c"]), ["d"])
    T.eq("short page next null", o.page(None, ["id"], 10)[1], None)
    T.eq("full last page next set", o.page(None, ["id"], 6)[1], ["e"])
    T.eq("after past end", page(["id"], 5, ["zzz"]), [])
    T.eq("cursor not at a doc", page([{"f": "asc"}], 2, [1.0, "zz"]), ["a", "aa"])
    for bad in ([1.5], [1.5, "a", 3]):
        try:
            o.page(None, [{"f": "asc"}], 2, bad)
            T.eq("cursor arity rejected", "accepted", "BadRequest")
        except BadRequest:
            T.passed += 1
    docs = make_corpus(1500, 3, 8)
    ob = Oracle(docs)
    for s in ([{"price": "desc"}, {"stock": "asc"}], [{"created": "asc"}], [{"tags": "asc"}], [{"stock": "desc"}]):
        orders = ob.norm_sort(s)
        a = ob.order(orders)[0].tolist()
        b = sorted(range(ob.n), key=lambda r: naive_sort_key(ob, r, orders))
        T.eq(f"cmp sort == key sort {s}", a, b)


def st_compare_and_knn(T):
    T.eq("strict 10 vs 10.0", strict_equal(10, 10.0), False)
    T.eq("strict true vs 1", strict_equal(True, 1), False)
    T.eq("strict nested", strict_equal({"a": [1, {"b": None}]}, {"a": [1, {"b": None}]}), True)
    T.eq("sort value f32 slack", sort_value_equal(10.1, 10.100000381469727), True)
    T.eq("sort value null", sort_value_equal(None, 0), False)
    T.eq("first diff", first_diff(["a", "b", "c"], ["a", "c"])["index"], 1)
    docs = [{"id": f"v{i}", "vec": v} for i, v in enumerate([[1, 0], [0.8, 0.6], [0.8, 0.6], [0, 1], [-1, 0]])]
    o = Oracle(docs)
    ck = Checker(FakeClient(o), o, Tally(), random.Random(1), [])
    rows, scores, nm, _ = o.knn([1, 0], None, 2)
    T.eq("knn exact", rows, [0, 1])
    global K
    k0, K = K, 2
    try:
        T.eq("tie-aware recall", ck.recall_of(["v0", "v2"], [1, 0], scores), 1.0)
        T.eq("recall miss", ck.recall_of(["v0", "v3"], [1, 0], scores), 0.5)
    finally:
        K = k0
    T.eq("buckets", [bucket_of(x) for x in (0.001, 0.01, 0.1, 0.5, 0.9)], [n for _, n in BUCKETS])
    rec = recall_table([(0.001, 0.9)] * 25 + [(0.5, 1.0)] * 5)
    T.eq("floor per bucket >= 20", (rec["<0.5%"]["pass"], rec["25-60%"]["pass"]), (False, True))


def st_fake_server(T):
    """The whole check suite against the oracle-as-server: clean passes, injected bugs are caught."""
    docs = make_corpus(3000, 7, 16)
    o = Oracle(docs)
    q = make_queries(60, 16, 7)
    args = argparse.Namespace(seed=7, requests=300, dim=16)
    t = run_checks(FakeClient(o), o, args, q)
    T.eq("fake server: no mismatches", t.total_mismatched(), 0)
    if t.total_mismatched():
        print("  first:", json.dumps(t.mismatches[0])[:600])
    T.eq("fake server: bad inputs all pass", [b["name"] for b in t.bad_inputs if not b["pass"]], [])
    T.eq("fake server: walks deep", min(w["got"] for w in t.walks) > 1000, True)
    T.eq("fake server: ties exercised", sum(w["tie_pairs"] for w in t.walks) > 100, True)
    T.eq("fake server: recall 1.0", all(r == 1.0 for _, r in t.recall), True)
    for bug, op in (("count", "count"), ("tie", "walk"), ("knn", "search")):
        tb = run_checks(FakeClient(o, bug), o, argparse.Namespace(seed=7, requests=150, dim=16), q)
        T.eq(f"injected bug {bug} caught in {op}", tb.ops.get(op, {}).get("mismatched", 0) > 0, True)
    _, failures = verdict(t)
    T.eq("verdict clean", failures, [])


def st_reads(T):
    line = read_line("POST", "/collections/t/count", {"filter": {"term": {"brand": "b001"}}})
    T.eq("mix line round trip", parse_read_line(line), ("POST", "/collections/t/count",
                                                        {"filter": {"term": {"brand": "b001"}}}))
    T.eq("mix line GET", parse_read_line("GET /collections/t/docs/d1"), ("GET", "/collections/t/docs/d1", None))
    T.eq("mix line one line", "\n" not in line, True)
    rep = {"steps": [{"concurrency": 8, "endpoints": {
        "get": {"count": 10, "errors": 0, "p50_us": 300, "p95_us": 1500, "p99_us": 2500},
        "page": {"count": 10, "errors": 1, "p50_us": 300, "p95_us": 1500, "p99_us": 2500},
        "count": {"count": 10, "errors": 0, "p50_us": 300, "p95_us": 2500, "p99_us": 2500}}}]}
    cells = [{"server": "x", "clients": cl, "cache": "cold", "endpoints": e} for cl, e in parse_load_report(rep).items()]
    T.eq("load parse", cells[0]["endpoints"]["get"]["p95"], 1.5)
    fails = judge_cells(cells)
    T.eq("targets judged", sorted(f.split(":")[0] for f in fails), ["x after", "x count", "x facet", "x page"])
    import tempfile
    o = Oracle(make_corpus(800, 7, 8))
    with tempfile.TemporaryDirectory() as d:
        paths = make_read_files(FakeClient(o), o, Path(d), 7, lines=40)
        parsed = {n: [parse_read_line(x) for x in p.read_text().splitlines()] for n, p in paths.items()}
    T.eq("read files", sorted(parsed), sorted(n for n, _ in READ_MIX))
    T.eq("after lines carry cursors", all("after" in b for _, _, b in parsed["after"]) and len(parsed["after"]) > 20,
         True)
    fc = FakeClient(o)
    T.eq("every read line answers 200", all(fc.request(m, pth, b)[0] == 200 for ls in parsed.values()
                                            for m, pth, b in ls), True)


def self_test():
    T = SelfTest()
    QUIET.append(True)
    for part in (st_generator, st_filters, st_naive_agreement, st_sort, st_compare_and_knn, st_reads,
                 st_fake_server):
        t0 = time.time()
        before = T.failed
        part(T)
        print(f"{part.__name__:22s} {'ok' if T.failed == before else 'FAILED'} ({time.time() - t0:.1f}s)")
    print(f"self-test: {T.passed} passed, {T.failed} failed")
    return 1 if T.failed else 0


# ----------------------------------------------------------------------------- main

def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--self-test", action="store_true", help="check the oracle itself (no server)")
    ap.add_argument("--docs", type=int, default=10000)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--bin", help="searchd binary (default target/release/searchd, built when missing)")
    ap.add_argument("--work", default=str(ROOT / "bench" / "data" / "fields-oracle"))
    ap.add_argument("--json", default=str(ROOT / "bench" / "results" / "fields-oracle.json"))
    ap.add_argument("--md", default=str(ROOT / "bench" / "results" / "fields-oracle.md"))
    ap.add_argument("--load", action="store_true", help="also run the reads under load (searchd load --mix)")
    ap.add_argument("--skip-oracle", action="store_true", help="with --load: only the reads under load")
    ap.add_argument("--search-threads", help="with --load: sweep serve --search-threads over this list (e.g. 1,2,4)")
    ap.add_argument("--load-warmup", default="2s")
    ap.add_argument("--load-duration", default="5s")
    ap.add_argument("--reads-json", default=str(ROOT / "bench" / "results" / "fields-reads.json"))
    ap.add_argument("--reads-md", default=str(ROOT / "bench" / "results" / "fields-reads.md"))
    return ap.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    if args.self_test:
        return self_test()
    install_signal_handlers()
    try:
        binary = ensure_binary(args.bin)
        rc = 0
        if not args.skip_oracle:
            rc = oracle_main(args, binary)
        if args.load:
            rc = max(rc, reads_main(args, binary))
        return rc
    except (RuntimeError, subprocess.CalledProcessError) as e:
        log(f"setup error: {e}")
        return 2
    except KeyboardInterrupt as e:
        log(f"interrupted ({e})")
        return 130


if __name__ == "__main__":
    sys.exit(main())
