"""The shapes of the topology snapshot and of events: plain dicts, typed for type checkers.

They are the core's JSON form (the same the CLI prints with ``watch --json``): a snapshot is a
:class:`Topology`; an event is one of the ``...Event`` dicts below, told apart by ``kind`` (a type
checker narrows :data:`Event` on ``event["kind"] == "primary_changed"``). Every event carries
``kind``, ``service`` and ``at`` (unix milliseconds). The kinds are listed once, in the core; see
``sentinel_recovery.EVENT_KINDS``.
"""

from __future__ import annotations

from typing import List, Literal, Optional, TypedDict, Union

__all__ = [
    "Address",
    "AnnouncedAddress",
    "SentinelInfo",
    "Topology",
    "ErrorInfo",
    "EventKind",
    "PrimaryChangedEvent",
    "ReplicasChangedEvent",
    "SentinelsChangedEvent",
    "SentinelDownEvent",
    "SentinelUpEvent",
    "ConnectionLostEvent",
    "ConnectionRestoredEvent",
    "DiscoveryFailedEvent",
    "FailoverStartedEvent",
    "SentinelTiltEvent",
    "SubscriptionLostEvent",
    "SubscriptionRestoredEvent",
    "SentinelServiceUnknownEvent",
    "SentinelMajorityLostEvent",
    "SentinelMajorityRegainedEvent",
    "Event",
]


class AnnouncedAddress(TypedDict):
    """An address as a sentinel reported it, before ``address_map``."""

    host: str
    port: int


class Address(AnnouncedAddress, total=False):
    """A host (name or IP literal, IPv6 without brackets) and a port: where the client connects.

    ``announced`` is present only when ``address_map`` mapped the address a sentinel reported
    (kept there) to this one.
    """

    announced: AnnouncedAddress


class _SentinelFields(TypedDict):
    host: str
    port: int
    #: Whether the last attempt to ask it succeeded (``False`` before it was ever reached).
    up: bool
    #: Whether it is in TILT: it answers, but its view may be stale.
    tilt: bool
    #: ``False`` once it answered that it does not monitor the service.
    knows_service: bool


class SentinelInfo(_SentinelFields, total=False):
    """One sentinel as the client knows it (``announced`` as in :class:`Address`)."""

    announced: AnnouncedAddress


class Topology(TypedDict):
    """A point-in-time view of the service; reading it never waits on the network."""

    service: str
    #: The verified primary; ``None`` before the first successful discovery. Kept while
    #: sentinels report no healthy primary.
    primary: Optional[Address]
    #: Replicas not flagged down or disconnected.
    replicas: List[Address]
    #: Every sentinel known: configured ones first, then learned ones.
    sentinels: List[SentinelInfo]
    #: The sentinels' config epoch of the service at the last successful discovery.
    epoch: int
    #: Whether the last discovery round found and verified the primary.
    healthy: bool


class ErrorInfo(TypedDict):
    """An error inside an event (``discovery_failed``): the fields of :class:`Error`."""

    code: str
    message: str
    server_code: Optional[str]


#: Every event kind (the core's table, ``sentinel_recovery.EVENT_KINDS``).
EventKind = Literal[
    "primary_changed",
    "replicas_changed",
    "sentinels_changed",
    "sentinel_down",
    "sentinel_up",
    "connection_lost",
    "connection_restored",
    "discovery_failed",
    "failover_started",
    "sentinel_tilt",
    "sentinel_service_unknown",
    "subscription_lost",
    "subscription_restored",
    "sentinel_majority_lost",
    "sentinel_majority_regained",
]


class PrimaryChangedEvent(TypedDict):
    """The verified primary moved (``old`` is ``None`` at the first discovery)."""

    kind: Literal["primary_changed"]
    service: str
    at: int
    old: Optional[Address]
    new: Address


class ReplicasChangedEvent(TypedDict):
    """The set of healthy replicas changed."""

    kind: Literal["replicas_changed"]
    service: str
    at: int
    replicas: List[Address]


class SentinelsChangedEvent(TypedDict):
    """A sentinel was learned; ``sentinels`` lists all of them now."""

    kind: Literal["sentinels_changed"]
    service: str
    at: int
    sentinels: List[SentinelInfo]


class SentinelDownEvent(TypedDict):
    """A sentinel stopped answering."""

    kind: Literal["sentinel_down"]
    service: str
    at: int
    sentinel: Address


class SentinelUpEvent(TypedDict):
    """A sentinel answered again."""

    kind: Literal["sentinel_up"]
    service: str
    at: int
    sentinel: Address


class ConnectionLostEvent(TypedDict):
    """The connection to the primary broke."""

    kind: Literal["connection_lost"]
    service: str
    at: int
    address: Address


class ConnectionRestoredEvent(TypedDict):
    """A connection to the primary works again."""

    kind: Literal["connection_restored"]
    service: str
    at: int
    address: Address


class DiscoveryFailedEvent(TypedDict):
    """A discovery round found no usable primary; the last one is kept and discovery retries.

    ``error["code"]`` is ``sentinels_unreachable``, ``service_unknown`` or ``no_healthy_primary``.
    """

    kind: Literal["discovery_failed"]
    service: str
    at: int
    error: ErrorInfo


class FailoverStartedEvent(TypedDict):
    """The failover leader started promoting ``promoting``; writes to ``primary`` wait."""

    kind: Literal["failover_started"]
    service: str
    at: int
    primary: Address
    promoting: Address


class SentinelTiltEvent(TypedDict):
    """A sentinel entered (``on``) or left TILT."""

    kind: Literal["sentinel_tilt"]
    service: str
    at: int
    sentinel: Address
    on: bool


class SentinelServiceUnknownEvent(TypedDict):
    """A reachable sentinel answered that it does not monitor the service."""

    kind: Literal["sentinel_service_unknown"]
    service: str
    at: int
    sentinel: Address


class SubscriptionLostEvent(TypedDict):
    """A pub/sub subscription lost its node: messages published until ``subscription_restored``
    are missed (Redis pub/sub is at-most-once)."""

    kind: Literal["subscription_lost"]
    service: str
    at: int
    address: Address


class SubscriptionRestoredEvent(TypedDict):
    """A pub/sub subscription is back on ``address``; ``gap_ms`` is how long it was lost."""

    kind: Literal["subscription_restored"]
    service: str
    at: int
    address: Address
    gap_ms: int


class SentinelMajorityLostEvent(TypedDict):
    """With ``sentinel_majority_ms``: fewer than a majority of the ``known`` sentinels answered
    within the bound (``heard`` did); writes wait until ``sentinel_majority_regained``."""

    kind: Literal["sentinel_majority_lost"]
    service: str
    at: int
    heard: int
    known: int


class SentinelMajorityRegainedEvent(TypedDict):
    """With ``sentinel_majority_ms``: ``confirmed`` of the ``known`` sentinels (a majority)
    name ``primary`` again; writes resume."""

    kind: Literal["sentinel_majority_regained"]
    service: str
    at: int
    primary: Address
    confirmed: int
    known: int


#: An event: one of the dicts above, told apart by ``kind``.
Event = Union[
    PrimaryChangedEvent,
    ReplicasChangedEvent,
    SentinelsChangedEvent,
    SentinelDownEvent,
    SentinelUpEvent,
    ConnectionLostEvent,
    ConnectionRestoredEvent,
    DiscoveryFailedEvent,
    FailoverStartedEvent,
    SentinelTiltEvent,
    SentinelServiceUnknownEvent,
    SubscriptionLostEvent,
    SubscriptionRestoredEvent,
    SentinelMajorityLostEvent,
    SentinelMajorityRegainedEvent,
]
