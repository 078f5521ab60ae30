"""The word index behind `q`: postings per (term, work order), kept up to date on every write.

A term is a word (case, accents and punctuation inside it folded: "Wi-Fi" is "wifi", and its
parts "wi" and "fi") or, for search as people type, one of a word's first PREFIX_LETTERS letters
with a "*" ("kit*" for "kitchen"). The last word of a search matches as a prefix; the others whole.

A search of one word walks postings through an index in the list's order and stops at the page,
so its cost does not grow with the desk (on the embedded engine, whose array indexes cannot serve
`{terms: w}`, and on a real MongoDB alike):

- a prefix of up to PREFIX_LETTERS letters is one term; a longer one is the few words it begins,
  found by seeking the term index word by word (at most WORDS of them; beyond that the postings of
  the range are read, at most SCAN, and sorted by the server);
- a person who sees only part of the desk searches it as disjoint parts (what they work on, the
  queue, what they asked for that someone else works on: `handedBy`), each an index range of its
  own: one filter with an `$or` would read every posting of a common word to find theirs;
- each (term, part) walk gives its first `offset + limit` postings, merged here; each count stops
  after CAP + 1 and, for disjoint parts of one term, they add up exactly.

Postings carry the list filters and sort keys, so a search is filtered and sorted without touching
the work orders until the page is known.
"""

import asyncio
import logging
import re
import time
import unicodedata
from typing import Any

from bson import ObjectId
from pymongo import ASCENDING, DESCENDING, UpdateMany
from pymongo.asynchronous.database import AsyncDatabase

Doc = dict[str, Any]
# A word: letters and digits, with punctuation allowed between them ("wi-fi", "o'neil", "3.5", "b-2").
TOKEN = re.compile(r"\w+(?:[-'’.·/]\w+)*")
PART = re.compile(r"\w+")
PREFIX_LETTERS = 3  # prefixes this short (or shorter) are terms of their own: one index walk each
MAX_TERMS = 500  # distinct words indexed per work order (a 5,000-character description has fewer)
CAP = 1000  # matches counted before a search says "1,000+"
SCAN = 5000  # postings read per word when intersecting several words, or for a prefix of many words
WORDS = 4  # words a longer prefix is searched as one by one, each an index walk; more: its range is read
POSTED = (
    "ownerId",
    "requesterId",
    "handedBy",
    "status",
    "priority",
    "priorityRank",
    "titleKey",
    "createdAt",
    "updatedAt",
    "dueKey",
    "openDue",
)
FORMAT = 3  # of the postings; a desk whose postings are older rebuilds them once at start-up
log = logging.getLogger(__name__)


def _postings(db: AsyncDatabase):
    return db["search_postings"]


async def ensure_indexes(db: AsyncDatabase) -> None:
    await _postings(db).create_index([("term", ASCENDING), ("createdAt", DESCENDING)], name="term_created")
    await _postings(db).create_index(
        [("term", ASCENDING), ("ownerId", ASCENDING), ("createdAt", DESCENDING)], name="term_owner_created"
    )
    await _postings(db).create_index(
        [("term", ASCENDING), ("handedBy", ASCENDING), ("createdAt", DESCENDING)], name="term_handed_created"
    )
    await _rebuild_if_older(db)


def fold(text: str) -> str:
    """Lower case without accents, as both the index and the search read text."""
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(char for char in decomposed if not unicodedata.combining(char)).casefold()


def words(text: str) -> list[str]:
    """The distinct folded words of `text`, in order of appearance: "Wi-Fi" gives "wifi", "wi" and "fi"."""
    found: list[str] = []
    for token in TOKEN.findall(fold(text)):
        parts = PART.findall(token)
        found += ["".join(parts), *parts] if len(parts) > 1 else parts
    return list(dict.fromkeys(found))


def prefixes(word: str) -> list[str]:
    """The prefix terms a word is found by as someone types it."""
    return [word[:size] + "*" for size in range(1, min(len(word), PREFIX_LETTERS) + 1)]


def _terms(doc: Doc) -> list[str]:
    found = words(f"{doc['title']} {doc['description']}")[:MAX_TERMS]
    return list(dict.fromkeys([*found, *(p for word in found for p in prefixes(word))]))


async def reindex(db: AsyncDatabase, order_id: ObjectId, before: Doc | None, after: Doc | None) -> None:
    """Move one work order's postings from `before` to `after` (None: it did not exist / was deleted).

    A posting's `_id` is `<order id>:<term>`, so the old ones are removed by primary key: a filter on
    `orderId` is a scan of every posting on the embedded engine, seconds at 100,000 orders.
    """
    if before is not None:
        await _postings(db).delete_many({"_id": {"$in": [f"{order_id}:{t}" for t in _terms(before)]}})
    if after is not None:
        await _insert(db, [after | {"_id": order_id}])


async def _insert(db: AsyncDatabase, orders: list[Doc]) -> None:
    postings = [
        {"_id": f"{order['_id']}:{term}", "term": term, "orderId": order["_id"]}
        | {key: order.get(key) for key in POSTED}
        for order in orders
        for term in _terms(order)
    ]
    if postings:  # a title and description without a word ("!!!", "💧") have none, and insert_many([]) raises
        await _postings(db).insert_many(postings, ordered=False)


async def stamp_title_keys(db: AsyncDatabase, orders: list[Doc]) -> None:
    """Copy each order's `titleKey` onto its postings, which carried the plain title before."""
    await stamp(db, orders, "titleKey", unset="title")


async def stamp(db: AsyncDatabase, orders: list[Doc], key: str, *, unset: str | None = None) -> None:
    """Copy each order's `key` onto its postings (a field added after they were written), dropping `unset`."""
    ops = [
        UpdateMany(
            {"_id": {"$in": [f"{order['_id']}:{term}" for term in _terms(order)]}},
            {"$set": {key: order[key]}} | ({"$unset": {unset: ""}} if unset else {}),
        )
        for order in orders
    ]
    if ops:
        await _postings(db).bulk_write(ops, ordered=False)


async def _rebuild_if_older(db: AsyncDatabase, *, batch: int = 500) -> None:
    """Index every order again when the postings were written by an older desk (FORMAT); once per desk.

    The mark is written last, so a crash part-way starts over at the next start-up.
    """
    meta = db["search_meta"]
    if (mark := await meta.find_one({"_id": "format"})) and mark["v"] == FORMAT:
        return
    started, done = time.monotonic(), 0
    if await db["work_orders"].find_one({}, {"_id": 1}) is not None:
        await _postings(db).delete_many({})
        last = None
        while (
            batch_docs := await db["work_orders"]
            .find({"_id": {"$gt": last}} if last else {})
            .sort("_id", ASCENDING)
            .limit(batch)
            .to_list()
        ):
            await _insert(db, batch_docs)
            last, done = batch_docs[-1]["_id"], done + len(batch_docs)
    await meta.update_one({"_id": "format"}, {"$set": {"v": FORMAT}}, upsert=True)
    if done:
        log.info("Indexed %d work orders for search in %.1f s", done, time.monotonic() - started)


async def search(
    db: AsyncDatabase,
    q: str,
    filters: Doc,
    sort: list[tuple[str, int]],
    *,
    offset: int,
    limit: int,
    parts: list[Doc] | None = None,
) -> tuple[list[ObjectId], int, bool]:
    """Ids of one page of work orders matching every word of `q` (the last as a prefix), the count and if exact.

    `filters` are plain field conditions; `parts` the disjoint slices of the desk the searcher sees
    (none: all of it).
    """
    wanted = _query_words(q)
    if not wanted:
        return [], 0, True
    sort = [("orderId" if key == "_id" else key, direction) for key, direction in sort]
    *whole, last = wanted
    terms = [last + "*"] if len(last) <= PREFIX_LETTERS else await _words_beginning(db, last)
    if not whole and terms is not None:
        queries = [[{"term": term, **walk} for walk in _walks_within(filters, parts)] for term in terms]
        return await _walks(db, queries, sort, offset, limit)
    matches, complete = await _intersect(db, whole, last, within(filters, parts or []), sort)
    return matches[offset : offset + limit], min(len(matches), CAP), complete and len(matches) <= CAP


async def _words_beginning(db: AsyncDatabase, prefix: str) -> list[str] | None:
    """The indexed words that begin with `prefix`, one index seek each; None when there are more than WORDS."""
    found: list[str] = []
    end = _after(prefix)
    while len(found) <= WORDS:
        bound = {"$gt": found[-1], "$lt": end} if found else {"$gte": prefix, "$lt": end}
        posting = await _postings(db).find_one({"term": bound}, {"term": 1}, sort=[("term", ASCENDING)])
        if posting is None:
            return found
        found.append(posting["term"])
    return None


async def _walks(
    db: AsyncDatabase, queries: list[list[Doc]], sort: list[tuple[str, int]], offset: int, limit: int
) -> tuple[list[ObjectId], int, bool]:
    """One page over index walks (each query's first offset + limit postings, merged) and the count.

    `queries`: per word, the disjoint parts of the desk to search it in.
    """
    flat = [query for word in queries for query in word]
    shown = {"orderId": 1, **{key: 1 for key, _ in sort}}
    postings = _postings(db)
    pages, counts = await asyncio.gather(
        asyncio.gather(*(postings.find(q, shown).sort(sort).limit(offset + limit).to_list() for q in flat)),
        asyncio.gather(*(postings.count_documents(q, limit=CAP + 1) for q in flat)),
    )
    ids = list(dict.fromkeys(p["orderId"] for p in _in_order([p for page in pages for p in page], sort)))
    total, exact = sum(counts), all(counted <= CAP for counted in counts)
    if len(queries) > 1:  # an order with two of the words is one order
        total, exact = await _distinct(db, flat, counts)
    return ids[offset : offset + limit], min(total, CAP), exact and total <= CAP


async def _distinct(db: AsyncDatabase, queries: list[Doc], counts: list[int]) -> tuple[int, bool]:
    """How many orders the walks of several words hold between them: read when at most CAP postings match."""
    if sum(counts) > CAP:  # at least as many as the largest walk: the count says "+"
        return max(counts), False
    found = await asyncio.gather(*(_postings(db).find(q, {"orderId": 1}).to_list() for q in queries))
    return len({p["orderId"] for postings in found for p in postings}), True


def _in_order(postings: list[Doc], sort: list[tuple[str, int]]) -> list[Doc]:
    """Postings in the list's order, as the server sorts them (a missing value first when ascending)."""
    for key, direction in reversed(sort):  # stable sorts, the least significant key first
        postings.sort(key=lambda p, k=key: (p.get(k) is not None, p.get(k)), reverse=direction < 0)
    return postings


def _after(prefix: str) -> str:
    """The first string after every string that begins with `prefix`."""
    return prefix[:-1] + chr(ord(prefix[-1]) + 1)


def _walks_within(filters: Doc, parts: list[Doc] | None) -> list[Doc]:
    """`filters` in each part, as plain conditions for an index walk; a part they rule out (an owner filter
    beside another owner's part) is left out, never allowed to override them."""
    return [
        {**filters, **part}
        for part in parts or [{}]
        if all(key not in filters or filters[key] == value for key, value in part.items())
    ]


def within(filter_: Doc, parts: list[Doc]) -> Doc:
    """`filter_` kept to the disjoint parts (none: no limit), as one filter with an `$or`. The `$or` goes under
    `$and`, so it merges into other filters by key: beside a top-level `$or`, the embedded engine dropped the
    other fields."""
    return {**filter_, "$and": [{"$or": parts}]} if parts else filter_


def _query_words(q: str) -> list[str]:
    """The words of a search, folded as the index folds them; a word's parts are not searched apart."""
    return list(dict.fromkeys("".join(PART.findall(token)) for token in TOKEN.findall(fold(q))))


async def _intersect(db: AsyncDatabase, whole: list[str], last: str, filters: Doc, sort) -> tuple[list[ObjectId], bool]:
    """Orders that have every word, in `sort` order; `complete` is false when a word had too many postings."""
    complete, common = True, None
    ordered: list[ObjectId] = []
    for ids, full in [await _whole(db, term, filters, sort) for term in whole] + [
        await _prefixed(db, last, filters, sort)
    ]:
        complete = complete and full
        ordered = ordered or ids
        common = set(ids) if common is None else common & set(ids)
    return [oid for oid in ordered if oid in (common or set())], complete


async def _whole(db: AsyncDatabase, term: str, filters: Doc, sort) -> tuple[list[ObjectId], bool]:
    ids = [
        p["orderId"]
        for p in await _postings(db)
        .find(_with_term({"term": term}, filters), {"orderId": 1})
        .sort(sort)
        .limit(SCAN)
        .to_list()
    ]
    return ids, len(ids) < SCAN


async def _prefixed(db: AsyncDatabase, prefix: str, filters: Doc, sort) -> tuple[list[ObjectId], bool]:
    """Orders with a word starting with `prefix`, in `sort` order (at most SCAN postings read)."""
    if len(prefix) <= PREFIX_LETTERS:
        return await _whole(db, prefix + "*", filters, sort)
    # Sorted by the server: the first SCAN are the right ones; its cost grows with the words' postings.
    query = _with_term({"term": {"$gte": prefix, "$lt": _after(prefix)}}, filters)
    found = await _postings(db).find(query, {"orderId": 1}).sort(sort).limit(SCAN).to_list()
    return list(dict.fromkeys(p["orderId"] for p in found)), len(found) < SCAN


def _with_term(term: Doc, filters: Doc) -> Doc:
    return {"$and": [term, filters]} if "$and" in filters else term | filters
