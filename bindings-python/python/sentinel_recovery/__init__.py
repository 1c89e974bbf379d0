"""sentinel-recovery for Python: find and follow a Redis or Valkey primary through Sentinel.

Discovery, failover handling, DNS and reconnects run on the core's own threads (``sr-worker-N``),
never on the asyncio event loop and never while holding the GIL. Two clients share one core:

* :class:`Client` for asyncio::

      async with Client.connect("redis+sentinel://127.0.0.1:26379/mymaster") as client:
          await client.execute("SET", "key", "value")
          async for event in client.events():
              print(event["kind"])  # typed: see Event, Topology

* :class:`BlockingClient` for threads; it releases the GIL while it waits::

      with BlockingClient.connect("redis+sentinel://127.0.0.1:26379/mymaster") as client:
          client.execute("GET", "key")

For clients that keep their own code, :class:`Proxy` runs the core's fencing RESP proxy in this
process: ``with Proxy(url) as proxy: redis.Redis.from_url(proxy.url)``.

Options are the URL's query keys (``command_timeout_ms=2000``, ``read_from="replica"``, ...),
given as keyword arguments; they override the URL. ``decode_responses=True`` returns ``str``
instead of ``bytes``. Errors are subclasses of :class:`Error` with a stable ``code``. Log records
of the core go to the :mod:`logging` logger ``sentinel_recovery``.
"""

from __future__ import annotations

import atexit
import logging

from . import _doctor, _errors, _native, _proxy, _pubsub, _types
from ._asyncio import AsyncEvents, Client
from ._blocking import BlockingClient, Events
from ._calls import AddressMapFn, Arg, OptionValue, _open, _settled
from ._doctor import DoctorFinding, DoctorReport, DoctorStatus, DoctorVerdict, doctor, doctor_blocking
from ._errors import *  # noqa: F401,F403 (the exception classes, listed once in _errors)
from ._errors import Error, _make_error
from ._native import set_worker_threads
from ._proxy import Proxy, ProxyStats
from ._pubsub import AsyncSubscription, Message, Name, Subscription
from ._tables import ERROR_CODES, EVENT_KINDS
from ._transaction import BlockingTransaction, Transaction
from ._types import (
    Address,
    AnnouncedAddress,
    ConnectionLostEvent,
    ConnectionRestoredEvent,
    DiscoveryFailedEvent,
    ErrorInfo,
    Event,
    EventKind,
    FailoverStartedEvent,
    PrimaryChangedEvent,
    ReplicasChangedEvent,
    SentinelDownEvent,
    SentinelInfo,
    SentinelMajorityLostEvent,
    SentinelMajorityRegainedEvent,
    SentinelServiceUnknownEvent,
    SentinelsChangedEvent,
    SentinelTiltEvent,
    SentinelUpEvent,
    SubscriptionLostEvent,
    SubscriptionRestoredEvent,
    Topology,
)

__all__ = [
    "Client",
    "BlockingClient",
    "AsyncEvents",
    "Events",
    # Pub/sub, listed once in _pubsub.
    *_pubsub.__all__,
    "Transaction",
    "BlockingTransaction",
    "Arg",
    "set_worker_threads",
    "doctor",
    "doctor_blocking",
    "AddressMapFn",
    *_doctor.__all__,
    # The fencing proxy, listed once in _proxy.
    *_proxy.__all__,
    "ERROR_CODES",
    "EVENT_KINDS",
    # The shapes of the topology and of events, listed once in _types.
    *_types.__all__,
    # The exception classes, listed once in _errors.
    *_errors.__all__,
]

__version__: str = _native.__version__

# The public classes say they are this package's, wherever they are defined (reprs, docs, pickles).
for _public in (Client, AsyncEvents, BlockingClient, Events, Transaction, BlockingTransaction, Proxy):
    _public.__module__ = __name__

_LOGGER = logging.getLogger("sentinel_recovery")
_LOGGER.addHandler(logging.NullHandler())  # the application decides where records go
_native._set_error_factory(_make_error)
_native._set_log_level(_LOGGER.getEffectiveLevel())
atexit.register(_native._shutdown)
