"""The Desk's bus: who hears a publication, in what order, and what a failing listener costs the others."""

import asyncio
import gc
import logging

from desk.bus import Bus


async def test_a_publication_reaches_its_key_then_the_whole_topic_in_the_order_they_subscribed():
    bus, heard = Bus(), []
    bus.subscribe("access", None, lambda m: heard.append(("any", m)))
    bus.subscribe("access", "ann", lambda m: heard.append(("ann", m)))
    bus.subscribe("access", "bob", lambda m: heard.append(("bob", m)))

    await bus.publish("access", "ann", "logged_out")

    assert heard == [("ann", "logged_out"), ("any", "logged_out")]  # never bob's, never another topic's


async def test_a_listener_that_returns_a_coroutine_is_awaited_before_publish_returns():
    bus, done = Bus(), []

    async def slow(message):
        await asyncio.sleep(0)
        done.append(message)

    bus.subscribe("tool_call", "c1", slow)
    await bus.publish("tool_call", "c1", "approved")
    assert done == ["approved"]


async def test_one_failing_listener_is_logged_without_its_message_and_the_others_still_hear(caplog):
    bus, heard = Bus(), []

    def broken(_):
        raise ValueError("Ann's secret order text")

    bus.subscribe("order", None, broken)
    bus.subscribe("order", None, heard.append)
    with caplog.at_level(logging.ERROR, logger="desk.bus"):
        await bus.publish("order", None, [{"seq": 1}])

    assert heard == [[{"seq": 1}]]
    assert "order subscriber failed" in caplog.text and "ValueError" in caplog.text
    assert "secret" not in caplog.text


async def test_unsubscribing_stops_delivery_and_subscribing_twice_delivers_once():
    bus, heard = Bus(), []
    off = bus.subscribe("run", "r1", heard.append)
    bus.subscribe("run", "r1", heard.append)  # wiring the same listener again changes nothing
    await bus.publish("run", "r1", 1)
    off()
    await bus.publish("run", "r1", 2)
    assert heard == [1]
    assert bus.subscribers("run", "r1") == 0


async def test_a_weakly_held_listener_is_forgotten_with_its_owner():
    class Turn:
        def __init__(self, heard):
            self.heard = heard

        def interrupt(self, by=None):
            self.heard.append(by)

    bus, heard = Bus(), []
    turn = Turn(heard)
    bus.subscribe("person", "ann", turn.interrupt, weak=True)
    await bus.publish("person", "ann")
    assert heard == [None]

    del turn
    gc.collect()
    await bus.publish("person", "ann")
    assert heard == [None] and bus.subscribers("person", "ann") == 0


async def test_waiting_wakes_on_its_key_only_while_the_block_runs():
    bus = Bus()
    with bus.waiting("tool_call", "c1") as woken:
        await bus.publish("tool_call", "c2")
        assert not woken.is_set()
        await bus.publish("tool_call", "c1")
        assert woken.is_set()
    assert bus.subscribers("tool_call", "c1") == 0
