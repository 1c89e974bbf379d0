// The fencing RESP proxy from the JVM, against real topologies: plain RESP over a socket (a
// client that knows nothing of Sentinel), through a planned failover on the same connection,
// options refused by name, close ending the sessions.
package sentinelrecovery

import java.net.StandardProtocolFamily
import java.net.UnixDomainSocketAddress
import java.nio.ByteBuffer
import java.nio.channels.SocketChannel
import java.nio.file.Files
import sentinelrecovery.uniffi.SentinelException

/** Runs [block] and returns the SentinelException it threw. */
private fun thrown(block: () -> Unit): SentinelException {
    try {
        block()
    } catch (e: SentinelException) {
        return e
    }
    throw Failure("no SentinelException was thrown")
}

/**
 * SET and GET through the proxy, then `SENTINEL FAILOVER`: once the proxy has moved the session
 * (a state: its `moves` counter), a SET on the same connection succeeds and its value is on the
 * new primary, not only replicated from the old one.
 */
internal fun proxyThroughPlannedFailover() {
    TestTopology().use { t ->
        SentinelProxy.start(t.url, mapOf("hold_ms" to "20000", "command_timeout_ms" to "5000")).use { proxy ->
            expectEqual("127.0.0.1:${proxy.port}", proxy.address, "the proxy's address")
            expectEqual("redis://127.0.0.1:${proxy.port}", proxy.redisUrl, "its redis URL")
            RespConnection(proxy.host!!, proxy.port!!).use { c ->
                // The first request waits for discovery within hold_ms.
                expectEqual<Any?>("PONG", c.call("PING"), "PING through the proxy")
                expectEqual<Any?>("OK", c.call("SET", "kt:proxy", "before"), "SET before the failover")
                expectEqual<Any?>("before", c.call("GET", "kt:proxy"), "GET before the failover")
                RespConnection("127.0.0.1", t.primaryPort).use { direct ->
                    expectEqual<Any?>("before", direct.call("GET", "kt:proxy"), "the value on the primary")
                }
                expectEqual(0L, proxy.stats().moves, "moves before the failover")

                t.cmd("failover")
                val newPort = TestTopology.portOf(t.cmd("wait-primary-not ${t.primaryPort} 30000", 40))
                waitUntil(30, "the proxy to move its session off the old primary") { proxy.stats().moves >= 1 }

                expectEqual<Any?>("OK", c.call("SET", "kt:proxy", "after"), "SET on the same connection after the failover")
                expectEqual<Any?>("after", c.call("GET", "kt:proxy"), "GET after the failover")
                RespConnection("127.0.0.1", newPort).use { direct ->
                    expectEqual<Any?>("master", (direct.call("ROLE") as List<*>)[0], "the new primary's role")
                    expectEqual<Any?>("after", direct.call("GET", "kt:proxy"), "the value on the new primary")
                }
                // A connection opened after the failover lands on the new primary too.
                RespConnection(proxy.host!!, proxy.port!!).use { fresh ->
                    expectEqual<Any?>("after", fresh.call("GET", "kt:proxy"), "GET on a new connection")
                }
                val stats = proxy.stats()
                expect(stats.commandsForwarded >= 5) { "commands forwarded: $stats" }
                expect(stats.primaryChanges >= 1) { "primary changes: $stats" }
                expectEqual(0L, stats.malformedRequests, "malformed requests")
            }
        }
    }
}

/** A bad option of the proxy's or of its client's is refused with `config` naming the key. */
internal fun proxyBadOptionsNameTheKey() {
    val url = "redis+sentinel://127.0.0.1:1/mymaster"
    for ((key, value) in listOf("hold_ms" to "soon", "route" to "sideways", "command_timeout_ms" to "x")) {
        val e = thrown { SentinelProxy.start(url, mapOf(key to value)) }
        expect(e is SentinelException.Config) { "$key=$value: $e" }
        expectEqual("config", e.errorCode, "$key=$value: the code")
        expect(e.message!!.contains(key)) { "$key=$value: the message names the key: ${e.message}" }
    }
    val remote = thrown { SentinelProxy.start(url, mapOf("listen" to "10.0.0.1:0")) }
    expect(remote.message!!.contains("allow_remote")) { "a remote address without allow_remote: ${remote.message}" }

    SentinelProxy.start(url).use { proxy ->
        val grace = thrown { proxy.close(-1) }
        expectEqual("config", grace.errorCode, "a negative grace")
        expect(grace.message!!.contains("grace")) { "the message names the grace: ${grace.message}" }
        expect(!proxy.isClosed) { "a refused grace closes nothing" }
    }
}

/**
 * Closing ends the sessions (the client sees its connection closed), later stats fail with
 * `closed`, and a second close is harmless.
 */
internal fun proxyCloseEndsItsSessions(url: String) {
    val proxy = SentinelProxy.start(url)
    RespConnection(proxy.host!!, proxy.port!!, timeoutMs = 10_000).use { c ->
        expectEqual<Any?>("PONG", c.call("PING"), "PING")
        expectEqual(1L, proxy.stats().sessionsOpen, "sessions open")
        proxy.close(0)
        expect(c.closedByPeer()) { "the session was not closed at close" }
    }
    expect(proxy.isClosed) { "isClosed" }
    expectEqual("closed", thrown { proxy.stats() }.errorCode, "stats after close")
    proxy.close()
}

/** A Unix socket listener: its address and path, and plain RESP over it. */
internal fun proxyOnAUnixSocket(url: String) {
    val dir = Files.createTempDirectory("sr-jvm-proxy")
    val path = dir.resolve("redis.sock")
    try {
        SentinelProxy.start(url, mapOf("listen" to "unix:$path")).use { proxy ->
            expectEqual("unix:$path", proxy.address, "address")
            expectEqual(path.toString(), proxy.path, "path")
            expect(proxy.host == null && proxy.port == null && proxy.redisUrl == null) { "no TCP address: $proxy" }
            SocketChannel.open(StandardProtocolFamily.UNIX).use { ch ->
                ch.connect(UnixDomainSocketAddress.of(path))
                // Non-blocking, polled: a proxy that never answers fails the test, not hangs it.
                ch.configureBlocking(false)
                val request = ByteBuffer.wrap("*1\r\n\$4\r\nPING\r\n".toByteArray())
                val buf = ByteBuffer.allocate(64)
                val deadline = System.nanoTime() + 20_000_000_000L
                while (buf.position() < 7 && System.nanoTime() < deadline) {
                    if (request.hasRemaining()) ch.write(request)
                    if (ch.read(buf) < 0) break
                    Thread.sleep(5)
                }
                expectEqual("+PONG\r\n", String(buf.array(), 0, buf.position()), "PING over the Unix socket")
            }
        }
        expect(!Files.exists(path)) { "the socket file is removed at close" }
    } finally {
        Files.deleteIfExists(path)
        Files.deleteIfExists(dir)
    }
}
