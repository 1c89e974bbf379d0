"""The redis-py connection kwargs of an adapter pool: what the URL says (through the core, never
parsed here), what the user passed, and the adapter's no-retry defaults."""

from __future__ import annotations

from typing import Any, Dict

from ._core import Core

#: Where a connection goes is the core's decision: these would contradict it.
NODE_KEYS = ("host", "port", "path", "unix_socket_path", "url")
#: Settings the URL carries for the data nodes; a redis-py kwarg may repeat them, not change them.
URL_KEYS = ("username", "password", "db", "client_name")
#: Connection kwargs of the adapter itself (which core, which route); carried by the connection
#: kwargs so that a pool rebuilt from them (RQ's worker pool, after fork) still routes.
ADAPTER_KEYS = ("sentinel_url", "sentinel_options", "sentinel_primary")


def check_no_node_keys(kwargs: Dict[str, Any], url_redacted: str) -> None:
    for key in NODE_KEYS:
        if key in kwargs:
            raise ValueError(
                f"{key}=: the adapter's connections go where Sentinel says (through {url_redacted}); "
                f"remove {key}= (the data nodes' db, user and password belong in the URL)"
            )


def merge_url_settings(core: Core, kwargs: Dict[str, Any]) -> Dict[str, Any]:
    """``kwargs`` with the URL's data-node settings filled in; a kwarg that differs from the
    URL raises ``ValueError`` naming it (never its value: it may be a password)."""
    check_no_node_keys(kwargs, core.url_redacted)
    merged = dict(kwargs)
    settings = core.settings
    for key in URL_KEYS:
        from_url = settings.get(key)
        if key == "db" and from_url == 0:
            from_url = None  # the URL's default: a db= kwarg chooses (it cannot be told apart)
        given = merged.get(key)
        if given is None:
            if from_url is not None:
                merged[key] = from_url
        elif from_url is not None and given != from_url:
            raise ValueError(f"{key}=: differs from the {key} of {core.url_redacted}; give it in one place only")
    if "ssl" in merged and bool(merged["ssl"]) != bool(settings.get("data_tls")):
        raise ValueError(
            f"ssl={merged['ssl']!r}: {core.url_redacted} has data_tls={bool(settings.get('data_tls'))}; "
            "set TLS in the URL (rediss+sentinel:// or data_tls=)"
        )
    merged.pop("ssl", None)
    return merged


def no_retry_defaults(kwargs: Dict[str, Any], retry_class: Any, no_backoff: Any) -> None:
    """redis-py >= 6 (and ``redis.Redis`` in 5 when given ``retry=``) re-sends a command after a
    connection error. A command that may have reached a server must not run twice, so the
    adapter's connections retry nothing unless the user passes ``retry=`` / ``retry_on_error=``."""
    if kwargs.get("retry") is None:
        kwargs["retry"] = retry_class(no_backoff(), 0)
    kwargs.setdefault("retry_on_timeout", False)
