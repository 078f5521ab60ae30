"""The desk's time zone: whose days "due today", "due this week" and the AI ledger count.

Stored beside the AI ledger (the triage policy names it, `desk.agent.core.budget.set_desk_zone`); read
here, outside the agent, so the work-order lists can ask it too. UTC until a policy names one.
"""

from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo, available_timezones

from pymongo.asynchronous.database import AsyncDatabase

LEDGER = "agent_spend"
ZONE = "zone"  # the document naming the desk's time zone


async def desk_zone(db: AsyncDatabase) -> str:
    """The desk's time zone, an IANA name (UTC until the triage policy names one)."""
    found = await db[LEDGER].find_one({"_id": ZONE})
    return found["zone"] if found else "UTC"


def day_in(moment: datetime, zone: str) -> date:
    """The day `moment` falls on in `zone`."""
    return moment.astimezone(ZoneInfo(zone)).date()


def end_of_day(day: date, zone: str) -> datetime:
    """The last millisecond of `day` in `zone`, in UTC: what "due on 10 Dec" means (by the day's end)."""
    next_midnight = datetime.combine(day + timedelta(days=1), time(), tzinfo=ZoneInfo(zone))
    return next_midnight.astimezone(UTC) - timedelta(milliseconds=1)


# tzdata's regions; what lies outside them (W-SU, Zulu, ROC, US/Pacific, Etc/GMT+3...) are legacy aliases kept only
# so old settings still read
REGIONS = ("Africa", "America", "Antarctica", "Arctic", "Asia", "Atlantic", "Australia", "Europe", "Indian", "Pacific")


def offered(current: str | None = None) -> list[str]:
    """The time zones a picker offers: UTC and the regions' IANA names, sorted; and `current`, the stored value,
    whatever it is (a legacy name saved before must still show, and save again unchanged)."""
    zones = {name for name in available_timezones() if name.split("/", 1)[0] in REGIONS and "/" in name}
    zones |= {"UTC"} | ({current} if current else set())
    return sorted(zones)
