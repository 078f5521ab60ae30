"""The word index behind `q`: one posting per (word, work order), kept up to date on every write.

A one-word search reads a page of postings through the (term, createdAt) index, so its cost does
not grow with the desk, on the embedded engine (whose array indexes cannot serve `{terms: w}`)
and on a real MongoDB alike. Postings carry the list filters and sort keys, so a search is
filtered and sorted without touching the work orders until the page is known.
"""

import re
from typing import Any

from bson import ObjectId
from pymongo import ASCENDING, DESCENDING, UpdateMany
from pymongo.asynchronous.database import AsyncDatabase

Doc = dict[str, Any]
WORD = re.compile(r"\w+")
MAX_TERMS = 500  # distinct words indexed per work order (a 5,000-character description has fewer)
CAP = 1000  # matches counted before a search says "1,000+"
MULTI_WORD_SCAN = 5000  # postings read per word when intersecting several words
POSTED = ("ownerId", "status", "priority", "priorityRank", "titleKey", "createdAt", "updatedAt")


def _postings(db: AsyncDatabase):
    return db["search_postings"]


async def ensure_indexes(db: AsyncDatabase) -> None:
    await _postings(db).create_index([("term", ASCENDING), ("createdAt", DESCENDING)], name="term_created")
    await _postings(db).create_index(
        [("term", ASCENDING), ("ownerId", ASCENDING), ("createdAt", DESCENDING)], name="term_owner_created"
    )


def words(text: str) -> list[str]:
    """The distinct lower-case words of `text`, in order of appearance."""
    return list(dict.fromkeys(WORD.findall(text.lower())))


async def reindex(db: AsyncDatabase, order_id: ObjectId, before: Doc | None, after: Doc | None) -> None:
    """Move one work order's postings from `before` to `after` (None: it did not exist / was deleted).

    A posting's `_id` is `<order id>:<word>`, so the old ones are removed by primary key: a filter on
    `orderId` is a scan of every posting on the embedded engine, seconds at 100,000 orders.
    """
    if before is not None:
        await _postings(db).delete_many({"_id": {"$in": [f"{order_id}:{t}" for t in _terms(before)]}})
    if after is not None:
        shared = {key: after[key] for key in POSTED}
        postings = [
            {"_id": f"{order_id}:{term}", "term": term, "orderId": order_id, **shared} for term in _terms(after)
        ]
        if postings:  # a title and description without a word ("!!!", "💧") have none, and insert_many([]) raises
            await _postings(db).insert_many(postings)


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


def _terms(doc: Doc) -> list[str]:
    return words(f"{doc['title']} {doc['description']}")[:MAX_TERMS]


async def search(
    db: AsyncDatabase, q: str, filters: Doc, sort: list[tuple[str, int]], *, offset: int, limit: int
) -> tuple[list[ObjectId], int, bool]:
    """Ids of one page of work orders containing every word of `q`, the match count and whether it is exact."""
    wanted = words(q)
    if not wanted:
        return [], 0, True
    sort = [("orderId" if key == "_id" else key, direction) for key, direction in sort]
    if len(wanted) == 1:
        query = {"term": wanted[0], **filters}
        page = await _postings(db).find(query, {"orderId": 1}).sort(sort).skip(offset).limit(limit).to_list()
        # Counted by the server, which stops after CAP + 1 matches and, for word and owner, reads the index only.
        counted = await _postings(db).count_documents(query, limit=CAP + 1)
        return [p["orderId"] for p in page], min(counted, CAP), counted <= CAP
    matches, complete = await _intersect(db, wanted, filters, sort)
    return matches[offset : offset + limit], min(len(matches), CAP), complete and len(matches) <= CAP


async def _intersect(db: AsyncDatabase, wanted: list[str], filters: Doc, sort) -> tuple[list[ObjectId], bool]:
    """Orders that have every word, in `sort` order; `complete` is false when a word had too many postings."""
    complete, common = True, None
    ordered: list[ObjectId] = []
    for term in wanted:
        cursor = _postings(db).find({"term": term, **filters}, {"orderId": 1}).sort(sort).limit(MULTI_WORD_SCAN)
        ids = [p["orderId"] for p in await cursor.to_list()]
        complete = complete and len(ids) < MULTI_WORD_SCAN
        ordered = ordered or ids
        common = set(ids) if common is None else common & set(ids)
    return [oid for oid in ordered if oid in (common or set())], complete
