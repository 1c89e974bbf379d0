"""Listens on N loopback ports, accepts connections and never answers (a hung sentinel).

Prints the ports as one JSON line, runs until stdin closes. Bounded: it holds at most 10,000
connections and stops after --max-seconds.
"""

import json
import selectors
import socket
import sys
import threading
import time

n = int(sys.argv[1]) if len(sys.argv) > 1 else 3
max_seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 900
sel = selectors.DefaultSelector()
listeners = []
for _ in range(n):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(1024)
    s.setblocking(False)
    sel.register(s, selectors.EVENT_READ)
    listeners.append(s)
print(json.dumps([s.getsockname()[1] for s in listeners]), flush=True)
stop = threading.Event()
threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
held = []
deadline = time.monotonic() + max_seconds
while not stop.is_set() and time.monotonic() < deadline:
    for key, _ in sel.select(timeout=0.2):
        try:
            conn, _ = key.fileobj.accept()
            if len(held) < 10_000:
                held.append(conn)  # never read, never answered
            else:
                conn.close()
        except OSError:
            pass
