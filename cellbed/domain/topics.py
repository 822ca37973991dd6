"""MQTT topic names that more than one agent uses (the publisher and its subscribers)."""
from __future__ import annotations


def report_topic(cell: str, host: str = "+") -> str:
    """MASB node reports to the brokers (a node publishes under its own host name)."""
    return f"cellbed/{cell}/masb/report/{host}"


def node_topic(cell: str, host: str) -> str:
    """A node daemon's state and event topics live under this prefix (``/state``, ``/events``)."""
    return f"cellbed/{cell}/node/{host}"
