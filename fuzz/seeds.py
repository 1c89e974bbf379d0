#!/usr/bin/env python3
"""Writes the committed seed corpora, fuzz/corpus/<target>/<name>: real reply and event shapes
(Redis 7 / Valkey sentinels as the core's tests show them) and the URLs of the README and tests.

Run from anywhere: `python3 fuzz/seeds.py`. Seeds keep their names, so re-running only rewrites
them; files added by hand (`crash-*`: inputs that found a bug, now fixed) stay.
"""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
RESP2, RESP3 = b"\x00", b"\x01"


def bulk(s):
    s = s.encode() if isinstance(s, str) else s
    return b"$%d\r\n%s\r\n" % (len(s), s)


def arr(items, kind=b"*"):
    return kind + b"%d\r\n" % len(items) + b"".join(items)


def flat(fields):
    return arr([bulk(x) for kv in fields for x in kv])


def rmap(fields):
    return b"%%%d\r\n" % len(fields) + b"".join(bulk(k) + bulk(v) for k, v in fields)


MASTER = [
    ("name", "mymaster"), ("ip", "127.0.0.1"), ("port", "6379"),
    ("runid", "8c1b9c4a5e4b3f2a1d0c9b8a7f6e5d4c3b2a1f0e"), ("flags", "master"),
    ("link-pending-commands", "0"), ("link-refcount", "1"), ("last-ping-sent", "0"),
    ("last-ok-ping-reply", "512"), ("last-ping-reply", "512"),
    ("down-after-milliseconds", "1000"), ("info-refresh", "4096"), ("role-reported", "master"),
    ("role-reported-time", "120034"), ("config-epoch", "3"), ("num-slaves", "2"),
    ("num-other-sentinels", "2"), ("quorum", "2"), ("failover-timeout", "5000"),
    ("parallel-syncs", "1"),
]
REPLICA = [
    ("name", "127.0.0.1:6380"), ("ip", "127.0.0.1"), ("port", "6380"),
    ("runid", "1f7b8c0ad41d9c2e5a4a3f2b1c0d9e8f7a6b5c4d"), ("flags", "slave"),
    ("master-link-down-time", "0"), ("master-link-status", "ok"), ("master-host", "127.0.0.1"),
    ("master-port", "6379"), ("slave-priority", "100"), ("slave-repl-offset", "12345"),
]
DOWN_REPLICA = [
    ("name", "127.0.0.1:6381"), ("ip", "127.0.0.1"), ("port", "6381"), ("runid", ""),
    ("flags", "s_down,slave,disconnected"), ("master-link-status", "err"),
]
SENTINEL = [
    ("name", "6c2b2d3e9f8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c"), ("ip", "127.0.0.1"), ("port", "26380"),
    ("runid", "6c2b2d3e9f8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c"), ("flags", "sentinel"),
    ("last-hello-message", "312"), ("voted-leader", "?"), ("voted-leader-epoch", "0"),
]
INFO = (
    "# Sentinel\r\nsentinel_masters:1\r\nsentinel_tilt:0\r\nsentinel_tilt_since_seconds:-1\r\n"
    "sentinel_running_scripts:0\r\nsentinel_scripts_queue_length:0\r\n"
    "sentinel_simulate_failure_flags:0\r\n"
    "master0:name=mymaster,status=ok,address=127.0.0.1:6379,slaves=2,sentinels=3\r\n"
)

REPLIES = {
    "master-resp2": RESP2 + flat(MASTER),
    "master-resp3": RESP3 + rmap(MASTER),
    "master-odown-resp2": RESP2 + flat([("ip", "10.0.0.1"), ("port", "6379"),
                                        ("flags", "master,s_down,o_down")]),
    "replicas-resp2": RESP2 + arr([flat(REPLICA), flat(DOWN_REPLICA)]),
    "replicas-resp3": RESP3 + arr([rmap(REPLICA), rmap(DOWN_REPLICA)]),
    "replicas-empty": RESP2 + b"*0\r\n",
    "sentinels-resp2": RESP2 + arr([flat(SENTINEL)]),
    "sentinels-resp3": RESP3 + arr([rmap(SENTINEL)]),
    "addr-resp2": RESP2 + arr([bulk("127.0.0.1"), bulk("6379")]),
    "addr-ipv6-resp3": RESP3 + arr([bulk("::1"), bulk("6380")]),
    "addr-null-resp2": RESP2 + b"*-1\r\n",
    "addr-null-resp3": RESP3 + b"_\r\n",
    "role-master": RESP2 + arr([bulk("master"), b":3129659\r\n",
                                arr([arr([bulk("127.0.0.1"), bulk("6380"), bulk("3129242")])])]),
    "role-replica": RESP3 + arr([bulk("slave"), bulk("127.0.0.1"), b":6379\r\n",
                                 bulk("connected"), b":3167038\r\n"]),
    "role-replica-connecting": RESP2 + arr([bulk("slave"), bulk("127.0.0.1"), b":6379\r\n",
                                            bulk("connect"), b":-1\r\n"]),
    "role-sentinel": RESP2 + arr([bulk("sentinel"), arr([bulk("mymaster")])]),
    "info-resp2": RESP2 + bulk(INFO),
    "info-tilt-resp3": RESP3 + b"=%d\r\ntxt:%s\r\n" % (len(INFO) + 4, INFO.replace(
        "sentinel_tilt:0", "sentinel_tilt:1").encode()),
    "err-unknown-service": RESP2 + b"-ERR No such master with that name\r\n",
    "err-noperm-resp3": RESP3 + b"-NOPERM User watcher has no permissions to run the 'sentinel|replicas' command\r\n",
}

FRAMES = {
    "ok": RESP2 + b"+OK\r\n",
    "pong-and-next": RESP2 + b"+PONG\r\n:1\r\n$-1\r\n",
    "hello3-full": RESP3 + b"%7\r\n$6\r\nserver\r\n$5\r\nredis\r\n$7\r\nversion\r\n$6\r\n7.0.15\r\n"
    b"$5\r\nproto\r\n:3\r\n$2\r\nid\r\n:5\r\n$4\r\nmode\r\n$8\r\nsentinel\r\n$4\r\nrole\r\n"
    b"$6\r\nmaster\r\n$7\r\nmodules\r\n*0\r\n",
    "hello-refused-resp2": RESP2 + b"-ERR unknown command 'HELLO'\r\n",
    "wrongpass": RESP2 + b"-WRONGPASS invalid username-password pair or user is disabled.\r\n",
    "exec-nested-error": RESP2 + b"*3\r\n+OK\r\n-WRONGTYPE Operation against a key holding the wrong kind of value\r\n$-1\r\n",
    "exec-resp3": RESP3 + b"*3\r\n+OK\r\n!21\r\nWRONGTYPE wrong kind\r\n_\r\n",
    "subscribe-resp2": RESP2 + arr([bulk("subscribe"), bulk("+switch-master"), b":1\r\n"])
    + arr([bulk("message"), bulk("+switch-master"),
           bulk("mymaster 127.0.0.1 6379 127.0.0.1 6380")]),
    "subscribe-resp3": RESP3 + arr([bulk("subscribe"), bulk("+sdown"), b":1\r\n"], b">")
    + arr([bulk("message"), bulk("+sdown"), bulk("master mymaster 127.0.0.1 6379")], b">"),
    "resp3-scalars": RESP3 + b"*7\r\n#t\r\n#f\r\n,1.5\r\n,-inf\r\n(3492890328409238509324850943850943825024385\r\n"
    b"=15\r\ntxt:Some string\r\n_\r\n",
    "resp3-set-map": RESP3 + b"~3\r\n:1\r\n:2\r\n:1\r\n",
    "resp3-attribute": RESP3 + b"|1\r\n+key-popularity\r\n%2\r\n$1\r\na\r\n,0.1923\r\n$1\r\nb\r\n,0.0012\r\n*2\r\n:2039123\r\n:9543892\r\n",
    "resp3-null-bulk": RESP3 + b"$-1\r\n",
    "resp3-blob-error": RESP3 + b"!21\r\nSYNTAX invalid syntax\r\n",
    "deep": RESP2 + b"*1\r\n" * 32 + b":1\r\n",
    "too-deep": RESP2 + b"*1\r\n" * 33 + b":1\r\n",
    "bulk-binary": RESP2 + b"$4\r\n\x00\r\n\xff\r\n",
    "bulk-unterminated": RESP2 + b"$3\r\nfooXY",
    "partial-array": RESP2 + b"*3\r\n$3\r\nfoo\r\n$3\r\nba",
    "huge-count": RESP2 + b"*99999999999\r\n",
    "signed-length": RESP2 + b"$+3\r\nfoo\r\n",
    "mget": RESP2 + b"*3\r\n$1\r\na\r\n$-1\r\n$1\r\nc\r\n",
    "loading": RESP2 + b"-LOADING Redis is loading the dataset in memory\r\n",
    "masterdown": RESP2 + b"-MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.\r\n",
}

CHANNELS = [
    "+switch-master", "+sdown", "-sdown", "+odown", "-odown", "+slave", "+convert-to-slave",
    "+sentinel", "+tilt", "-tilt", "+failover-end", "+reset-master",
    "+failover-state-send-slaveof-noone", "-failover-abort-not-elected",
    "-failover-abort-no-good-slave", "-failover-abort-slave-timeout",
]
EVENTS = [
    ("+switch-master", "mymaster 127.0.0.1 6379 127.0.0.1 6380"),
    ("+sdown", "master mymaster 127.0.0.1 6379"),
    ("-sdown", "slave 127.0.0.1:6381 127.0.0.1 6381 @ mymaster 127.0.0.1 6379"),
    ("+odown", "master mymaster 127.0.0.1 6379 #quorum 2/2"),
    ("-odown", "master mymaster 127.0.0.1 6379"),
    ("+slave", "slave 127.0.0.1:6381 127.0.0.1 6381 @ mymaster 127.0.0.1 6379"),
    ("+convert-to-slave", "slave 127.0.0.1:6379 127.0.0.1 6379 @ mymaster 127.0.0.1 6380"),
    ("+sentinel", "sentinel 1f7b8c0ad41d9c2e5a4a3f2b1c0d9e8f7a6b5c4d 10.0.0.7 26380 @ cache 10.0.0.1 6379"),
    ("+tilt", "#tilt mode entered"),
    ("-tilt", "#tilt mode exited"),
    ("+failover-end", "master mymaster 127.0.0.1 6379"),
    ("+reset-master", "master other 10.0.0.1 6379"),
    ("+failover-state-send-slaveof-noone", "slave 127.0.0.1:6380 127.0.0.1 6380 @ mymaster 127.0.0.1 6379"),
    ("-failover-abort-not-elected", "master mymaster 127.0.0.1 6379"),
    ("-failover-abort-no-good-slave", "master mymaster 127.0.0.1 6379"),
    ("-failover-abort-slave-timeout", "master mymaster 127.0.0.1 6379"),
    ("-sdown", "slave redis-1.example:6379 redis-1.example 6379 @ svc redis-0.example 6379"),
]
RAW_EVENTS = [
    # Channels outside the subscribed list (control byte past it: "channel\npayload").
    ("+new-epoch", "4"),
    ("+try-failover", "master mymaster 127.0.0.1 6379"),
    ("+sdown", "replica 10.0.0.2:6379 10.0.0.2 6379 @ svc 10.0.0.1 6379"),
]

URLS = [
    "redis+sentinel://10.0.0.1,10.0.0.2,10.0.0.3/mymaster",
    "redis+sentinel://127.0.0.1:26379/mymaster",
    "redis+sentinel://s1:26379,s2:26379,s3:26379/mymaster",
    "redis+sentinel://app:s%40cret@s1.example,10.0.0.2:26380,[::1]:26381/cache?db=2&client_name=svc"
    "&protocol=2&sentinel_user=watcher&sentinel_password=pw&connect_timeout_ms=300&read_from=prefer-replica",
    "valkey+sentinel://secret@localhost/svc",
    "redis+sentinel://:pw@h:1/s",
    "rediss+sentinel://h/s?tls=false",
    "redis+sentinel://h/s?sentinel_tls=true&tls_ca_file=/ca.pem&sentinel_tls_ca_file=/s.pem"
    "&tls_cert_file=/c.pem&tls_key_file=/k.pem&tls_insecure=1&tls_server_name=cache.internal",
    "redis+sentinel://app:hunter2@h/s?sentinel_password=swordfish&db=nope",
    "redis+sentinel://h/s?retry_base_ms=500&retry_max_ms=100",
    "redis+sentinel://slow-a.sr.test:26379,fast.sr.test:26380/mymaster?dns_server=127.0.0.1:5353&dns_timeout_ms=500",
    "redis+sentinel://127.0.0.1:26379/mymaster?queue_size=20000&command_timeout_ms=60000&sentinel_events=false",
    "redis+sentinel://h%20x/s",
    "redis+sentinel://::1/s",
    "redis+sentinel://[zz]:1/s",
    "redis+sentinel://a..b/s",
    "redis+sentinel://user:s3cretpw@host:notaport/m",
    "redis+sentinel://app:c2VjcmV0/K3Bhc3M=@h/s",
    "redis+sentinel://h/s?sentinel_password=pa&ss&db=1",
]


def der(tag, content):
    """One DER element (short or two-byte long length form)."""
    if len(content) < 0x80:
        return bytes([tag, len(content)]) + content
    return bytes([tag, 0x82]) + struct.pack(">H", len(content)) + content


def certificate(version, not_after_tag, not_after, issuer_len=150):
    """The skeleton of an X.509 certificate the doctor's walker reads: tbsCertificate with an
    optional [0] version, serial, signature algorithm, issuer, validity (notBefore, notAfter)."""
    tbs = der(0xA0, der(0x02, b"\x02")) if version else b""
    tbs += der(0x02, b"\x01\x02")
    tbs += der(0x30, der(0x06, b"\x2a\x86\x48\x86\xf7\x0d\x01\x01\x0b"))
    tbs += der(0x30, b"\x00" * issuer_len)
    tbs += der(0x30, der(0x17, b"250101000000Z") + der(not_after_tag, not_after))
    tbs += der(0x30, b"")
    return der(0x30, der(0x30, tbs) + der(0x30, der(0x06, b"\x2a")) + der(0x03, b"\x00"))


CERTIFICATES = {
    "utc_v3": certificate(True, 0x17, b"300615123456Z"),
    "generalized_v3": certificate(True, 0x18, b"20300615123456Z"),
    "utc_v1_short_issuer": certificate(False, 0x17, b"491231235959Z", issuer_len=4),
    "epoch": certificate(True, 0x17, b"700101000000Z"),
    "bad_month": certificate(True, 0x17, b"301315123456Z"),
    "octet_string_time": certificate(True, 0x04, b"300615123456Z"),
    "indefinite_length": b"\x30\x80\x30\x80",
    "huge_length": b"\x30\x84\xff\xff\xff\xff",
}


def write(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def main():
    for name, data in {**REPLIES, **FRAMES}.items():
        write("resp_frames", name, data)
        write("resp_differential", name, data)
    for name, data in REPLIES.items():
        write("sentinel_replies", name, data)
    for i, (channel, payload) in enumerate(EVENTS):
        write("sentinel_events", "%02d%s" % (i, channel), bytes([CHANNELS.index(channel)]) + payload.encode())
    for i, (channel, payload) in enumerate(RAW_EVENTS):
        write("sentinel_events", "raw%d%s" % (i, channel), b"\xff" + channel.encode() + b"\n" + payload.encode())
    for i, url in enumerate(URLS):
        # `Input::Raw`: the variant index (a little-endian u32 below 2^30), then the text.
        write("config_url", "url%02d" % i, struct.pack("<I", 0) + url.encode())
    for name, data in CERTIFICATES.items():
        write("tls_not_after", name, data)


if __name__ == "__main__":
    main()
