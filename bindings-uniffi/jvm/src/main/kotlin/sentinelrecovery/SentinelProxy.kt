// The fencing RESP proxy in this process, for clients that keep their own code (Jedis, Lettuce,
// Redisson, Spring Data Redis): they point at the proxy's loopback address as if at one
// standalone Redis. The proxy runs on the core's threads; this layer converts and schedules.
package sentinelrecovery

import java.util.concurrent.CompletableFuture
import kotlinx.coroutines.CoroutineScope
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.SupervisorJob
import kotlinx.coroutines.future.future
import sentinelrecovery.uniffi.Proxy
import sentinelrecovery.uniffi.ProxyStats
import sentinelrecovery.uniffi.SentinelException
import sentinelrecovery.uniffi.TimeoutUnit

/**
 * A fencing RESP proxy in front of one Sentinel-managed service, running in this process:
 * one session per client connection with its own upstream connection to the ROLE-verified
 * primary, nothing written to a primary being demoted, sessions moved with their state replayed
 * at a failover, and nothing re-sent that may have reached a server.
 *
 * ```kotlin
 * SentinelProxy.start("redis+sentinel://127.0.0.1:26379/mymaster").use { proxy ->
 *     val jedis = redis.clients.jedis.Jedis(proxy.host, proxy.port!!) // no Sentinel code
 * }
 * ```
 * ```java
 * try (SentinelProxy proxy = SentinelProxy.start(url, Map.of("hold_ms", "5000"))) {
 *     RedisClient lettuce = RedisClient.create(proxy.getRedisUrl());
 * }
 * ```
 *
 * Starting returns once the proxy accepts connections; it never waits for discovery (a request
 * that arrives before the primary is known waits for it within the hold bound). Options: the
 * proxy's own keys (`listen` = `"IP:PORT"`, default `"127.0.0.1:0"`, or `"unix:PATH"`; a
 * non-loopback address needs `allow_remote` = `"true"`, as the proxy passes on whatever reaches
 * it; `hold_ms`, `max_clients`, `idle_timeout_ms`, `max_request_bytes`, `route` = `primary` |
 * `read`, `lend_credentials`, `unix_mode`) and any key of the URL's query for its client. A bad
 * one throws [sentinelrecovery.uniffi.SentinelException.Config] whose message names the key.
 * The throwing calls declare [SentinelException] (`@Throws`), so Java can catch it by type.
 *
 * Error replies of the proxy itself begin with a stable code word: `UNCERTAIN` (the command
 * reached a primary being demoted, or its connection broke before the reply: it may or may not
 * have been applied; never re-sent), `FENCED` (no verified primary within the hold bound: not
 * sent), `NOTREPLICATED` (`wait_replicas` not met), `EXECABORT` (a MULTI open at the change).
 */
class SentinelProxy private constructor(private val native: Proxy) : AutoCloseable {
    /** Where the Java variant resumes: its future never completes on a core thread. */
    private val scope = CoroutineScope(SupervisorJob() + Dispatchers.Default)

    companion object {
        /** Starts a proxy for a `redis+sentinel://` URL with options (see the class). */
        @JvmStatic
        @JvmOverloads
        @Throws(SentinelException::class)
        fun start(url: String, options: Map<String, String> = emptyMap()): SentinelProxy =
            SentinelProxy(Proxy.start(url, options))
    }

    /** Where the proxy listens: `IP:PORT` (`[IP]:PORT` for IPv6) or `unix:PATH`. */
    val address: String = native.address()

    /** The listening IP (without brackets for IPv6); `null` on a Unix socket. */
    val host: String? = native.host()

    /** The listening port; `null` on a Unix socket. */
    val port: Int? = native.port()?.toInt()

    /** The Unix socket's path; `null` on TCP. */
    val path: String? = native.path()

    /** `redis://HOST:PORT` for clients that take a URL; `null` on a Unix socket. */
    val redisUrl: String? = host?.let { h -> "redis://${if (':' in h) "[$h]" else h}:$port" }

    /**
     * The proxy's counters now (sessions, commands forwarded and held, fenced replies, moves,
     * ...); [sentinelrecovery.uniffi.SentinelException.Closed] once closed.
     */
    @Throws(SentinelException::class)
    fun stats(): ProxyStats = native.stats()

    /** Whether the proxy was closed (or is closing). */
    val isClosed: Boolean get() = native.isClosed()

    /**
     * Closes the proxy: stops accepting, lets replies in flight reach their clients for up to
     * [graceMs] (`null`: 5000; 0 closes at once), then closes every session and the proxy's
     * client. A grace outside 0..2147483647 throws
     * [sentinelrecovery.uniffi.SentinelException.Config] and closes nothing. Idempotent.
     */
    suspend fun shutdown(graceMs: Long? = null) {
        native.shutdown(graceMs?.toDouble(), TimeoutUnit.MILLISECONDS)
    }

    /** [shutdown] for Java. */
    @JvmOverloads
    fun shutdownAsync(graceMs: Long? = null): CompletableFuture<Unit> = scope.future { shutdown(graceMs) }

    /** [close] with a grace of its own for replies in flight ([shutdown]'s rule). */
    @Throws(SentinelException::class)
    fun close(graceMs: Long) {
        native.shutdownBlocking(graceMs.toDouble(), TimeoutUnit.MILLISECONDS)
    }

    /**
     * Closes the proxy (replies in flight get 5 s) and waits until that is complete.
     * Idempotent; later [stats] fail with `closed` (the native object itself is freed by its
     * cleaner once unreachable).
     */
    @Throws(SentinelException::class)
    override fun close() {
        native.shutdownBlocking(null, TimeoutUnit.MILLISECONDS)
    }

    override fun toString(): String = "SentinelProxy($address)"
}
