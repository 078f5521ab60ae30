"""The word index behind `q`: postings per (term, work order), kept up to date on every write.

A term is a word (case, accents and punctuation inside it folded: "Wi-Fi" is "wifi", and its
parts "wi" and "fi") or, for search as people type, one of a word's first PREFIX_LETTERS letters
with a "*" ("kit*" for "kitchen"). The last word of a search matches as a prefix; the others whole.

A search of one word reads a page of postings through the (term, createdAt) index, so its cost
does not grow with the desk, on the embedded engine (whose array indexes cannot serve
`{terms: w}`) and on a real MongoDB alike; a prefix of up to PREFIX_LETTERS letters is one term
too. A longer prefix reads the postings of the words it begins, sorted by the server, at most
SCAN of them (few words share four letters, so their postings are few next to a short prefix's).
Postings carry the list filters and sort keys, so a search is filtered and sorted without
touching the work orders until the page is known.
"""

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
SCAN = 5000  # postings read per word when intersecting several words, or for a longer prefix
POSTED = ("ownerId", "requesterId", "status", "priority", "priorityRank", "titleKey", "createdAt", "updatedAt")
FORMAT = 2  # of the postings; a desk whose postings are older rebuilds them once at start-up
log = logging.getLogger(__name__)


def _postings(db: AsyncDatabase):
    return db["search_postings"]


async def ensure_indexes(db: AsyncDatabase) -> None:
    await _postings(db).create_index([("term", ASCENDING), ("createdAt", DESCENDING)], name="term_created")
    await _postings(db).create_index(
        [("term", ASCENDING), ("ownerId", ASCENDING), ("createdAt", DESCENDING)], name="term_owner_created"
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
    ops = [
        UpdateMany(
            {"_id": {"$in": [f"{order['_id']}:{term}" for term in _terms(order)]}},
            {"$set": {"titleKey": order["titleKey"]}, "$unset": {"title": ""}},
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
    db: AsyncDatabase, q: str, filters: Doc, sort: list[tuple[str, int]], *, offset: int, limit: int
) -> tuple[list[ObjectId], int, bool]:
    """Ids of one page of work orders matching every word of `q` (the last as a prefix), the count and if exact."""
    wanted = _query_words(q)
    if not wanted:
        return [], 0, True
    sort = [("orderId" if key == "_id" else key, direction) for key, direction in sort]
    *whole, last = wanted
    if not whole and len(last) <= PREFIX_LETTERS:
        query = _where({"term": last + "*"}, filters)
        page = await _postings(db).find(query, {"orderId": 1}).sort(sort).skip(offset).limit(limit).to_list()
        # Counted by the server, which stops after CAP + 1 matches and, for term and owner, reads the index only.
        counted = await _postings(db).count_documents(query, limit=CAP + 1)
        return [p["orderId"] for p in page], min(counted, CAP), counted <= CAP
    matches, complete = await _intersect(db, whole, last, filters, sort)
    return matches[offset : offset + limit], min(len(matches), CAP), complete and len(matches) <= CAP


def _where(term: Doc, filters: Doc) -> Doc:
    """The term and the list filters; an `$or` (who sees what) goes under `$and`, where the embedded
    engine keeps the term condition (beside top-level `$or` its find dropped it)."""
    return {"$and": [term, filters]} if "$or" in filters else term | filters


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
        .find(_where({"term": term}, filters), {"orderId": 1})
        .sort(sort)
        .limit(SCAN)
        .to_list()
    ]
    return ids, len(ids) < SCAN


async def _prefixed(db: AsyncDatabase, prefix: str, filters: Doc, sort) -> tuple[list[ObjectId], bool]:
    """Orders with a word starting with `prefix`, in `sort` order (at most SCAN postings read)."""
    if len(prefix) <= PREFIX_LETTERS:
        return await _whole(db, prefix + "*", filters, sort)
    after = prefix[:-1] + chr(ord(prefix[-1]) + 1)
    # Sorted by the server: the first SCAN are the right ones; its cost grows with the words' postings.
    query = _where({"term": {"$gte": prefix, "$lt": after}}, filters)
    found = await _postings(db).find(query, {"orderId": 1}).sort(sort).limit(SCAN).to_list()
    return list(dict.fromkeys(p["orderId"] for p in found)), len(found) < SCAN
