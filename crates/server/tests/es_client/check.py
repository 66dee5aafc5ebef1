"""The official Elasticsearch Python client against searchd (issue "What a user sees").

Run by crates/server/tests/es_client.rs with each installed client (8.x and 9.x):
    python check.py URL INDEX DIM
Every call is the client's own (its product check, media types, NDJSON bulk); each result
is checked against what the test's collection holds. Prints one JSON line of what ran.
"""
import json
import sys

from elasticsearch import Elasticsearch, NotFoundError

url, index, dim = sys.argv[1], sys.argv[2], int(sys.argv[3])
es = Elasticsearch(url, request_timeout=30)
ran = []


def check(name, cond, got):
    if not cond:
        raise SystemExit(f"{name}: unexpected {got!r}")
    ran.append(name)


info = es.info()
check("info", info["version"]["number"].startswith("8."), info)

# The collection starts with ids 0..29: color red/blue/green in turn, price on two in three.
c = es.count(index=index)
check("count", c["count"] == 30, c)
c = es.count(index=index, query={"term": {"color": "red"}})
check("count.term", c["count"] == 10, c)

vec = lambda i: [((i * 7 + j * 3) % 11) / 11.0 - 0.5 for j in range(dim)]
ops = []
for i in range(100, 110):
    ops.append({"index": {"_index": index, "_id": str(i)}})
    ops.append({"color": "violet", "price": float(i), "vec": vec(i)})
ops.append({"create": {"_index": index, "_id": "100"}})  # exists: a per-item 409
ops.append({"color": "violet", "vec": vec(100)})
ops.append({"delete": {"_index": index, "_id": "0"}})
ops.append({"update": {"_index": index, "_id": "101"}})
ops.append({"doc": {"color": "amber"}})
b = es.bulk(operations=ops, refresh="wait_for")
statuses = [list(it.values())[0]["status"] for it in b["items"]]
check("bulk", b["errors"] and statuses == [201] * 10 + [409, 200, 200], statuses)

c = es.count(index=index, query={"term": {"color": "violet"}})
check("bulk.visible", c["count"] == 9, c)
g = es.get(index=index, id="101")
check("get.updated", g["found"] and g["_source"]["color"] == "amber" and g["_source"]["price"] == 101.0, g)
try:
    es.get(index=index, id="0")
    raise SystemExit("get of a deleted document did not raise")
except NotFoundError:
    ran.append("get.deleted")

r = es.index(index=index, id="200", document={"color": "teal", "price": 2.5, "vec": vec(200)}, refresh=True)
check("index", r["result"] == "created", r)
r = es.index(index=index, id="200", document={"color": "teal", "price": 3.5, "vec": vec(200)}, refresh=True)
check("index.update", r["result"] == "updated", r)

m = es.mget(index=index, ids=["1", "200", "999"])
found = [d["found"] for d in m["docs"]]
check("mget", found == [True, True, False], m)

s = es.search(index=index, query={"term": {"color": "teal"}})
check("search.term", s["hits"]["total"]["value"] == 1 and s["hits"]["hits"][0]["_id"] == "200", s)

s = es.search(index=index, knn={"field": "vec", "query_vector": vec(105), "k": 3, "num_candidates": 50}, size=3)
check("search.knn", s["hits"]["hits"][0]["_id"] == "105", s["hits"]["hits"])

s = es.search(index=index, size=0, aggs={"colors": {"terms": {"field": "color", "size": 10}}})
buckets = {b["key"]: b["doc_count"] for b in s["aggregations"]["colors"]["buckets"]}
check("search.aggs", buckets.get("violet") == 9 and buckets.get("amber") == 1, buckets)

seen, after = [], None
while True:
    kw = {"search_after": after} if after else {}
    s = es.search(index=index, query={"range": {"price": {"gte": 100}}}, sort=[{"price": "asc"}, {"_id": "asc"}], size=4, **kw)
    hits = s["hits"]["hits"]
    if not hits:
        break
    seen += [h["_id"] for h in hits]
    after = hits[-1]["sort"]
check("search.search_after", seen == [str(i) for i in range(100, 110)], seen)

mp = es.indices.get_mapping(index=index)
props = mp[index]["mappings"]["properties"]
check("get_mapping", props["color"]["type"] == "keyword" and props["price"]["type"] == "double", props)

d = es.delete(index=index, id="200", refresh=True)
check("delete", d["result"] == "deleted", d)
cat = es.cat.indices(format="json")
check("cat.indices", any(r["index"] == index for r in cat), cat)

print(json.dumps({"client": ".".join(map(str, __import__("elasticsearch").__version__)), "ran": ran}))
