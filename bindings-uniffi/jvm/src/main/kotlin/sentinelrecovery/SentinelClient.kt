// The idiomatic JVM layer over the generated binding (package sentinelrecovery.uniffi): suspend
// functions and a Flow of events for Kotlin, CompletableFuture variants and a Consumer-based
// listener for Java, AutoCloseable. It converts arguments and schedules; the behaviour is the core's.
package sentinelrecovery

import java.util.concurrent.CompletableFuture
import java.util.concurrent.ConcurrentHashMap
import java.util.concurrent.Executor
import java.util.concurrent.ForkJoinPool
import java.util.function.Consumer
import kotlinx.coroutines.CoroutineScope
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.SupervisorJob
import kotlinx.coroutines.channels.Channel
import kotlinx.coroutines.channels.SendChannel
import kotlinx.coroutines.channels.awaitClose
import kotlinx.coroutines.flow.Flow
import kotlinx.coroutines.flow.buffer
import kotlinx.coroutines.flow.callbackFlow
import kotlinx.coroutines.future.future
import sentinelrecovery.uniffi.Client
import sentinelrecovery.uniffi.Event
import sentinelrecovery.uniffi.EventListener
import sentinelrecovery.uniffi.Reply
import sentinelrecovery.uniffi.Subscription
import sentinelrecovery.uniffi.TimeoutUnit
import sentinelrecovery.uniffi.Topology

/**
 * A client following one service's primary through Sentinel. Opening returns at once (discovery
 * runs on the core's threads); every call that waits is a `suspend` function (Kotlin) or returns a
 * [CompletableFuture] (Java) and never blocks a thread of the caller's pool. Errors are
 * [sentinelrecovery.uniffi.SentinelException] subclasses, one per shared code ([errorCode]).
 */
class SentinelClient private constructor(private val native: Client) : AutoCloseable {
    /** Where the Java variants resume: the caller's futures never complete on a core thread. */
    private val scope = CoroutineScope(SupervisorJob() + Dispatchers.Default)

    /** The event flows being collected: closing the client completes them. */
    private val flows: MutableSet<SendChannel<Event>> = ConcurrentHashMap.newKeySet()

    companion object {
        /** Opens a client from a `redis+sentinel://` URL and options (the URL's query keys). */
        @JvmStatic
        @JvmOverloads
        fun connect(url: String, options: Map<String, String> = emptyMap()): SentinelClient =
            SentinelClient(Client.connect(url, options))
    }

    /**
     * Subscribes to `channels` (and `patterns`) on a connection of the core's own that follows
     * failovers; completes once the node confirmed them.
     */
    suspend fun subscribe(channels: List<String>, patterns: List<String> = emptyList()): PubSubscription =
        PubSubscription(native.pubsub(channels.map { it.toByteArray() }, patterns.map { it.toByteArray() }, null))

    /** [subscribe] for Java. */
    @JvmOverloads
    fun subscribeAsync(channels: List<String>, patterns: List<String> = emptyList()): CompletableFuture<PubSubscription> =
        scope.future { subscribe(channels, patterns) }

    /** The topology once a verified primary is known (waits up to `command_timeout_ms`). */
    suspend fun ready(): Topology = native.ready()

    /** Runs one command given as bytes. */
    suspend fun execute(args: List<ByteArray>): Reply = native.execute(args)

    /** Runs one command given as text (each argument sent as UTF-8). */
    suspend fun execute(vararg args: String): Reply = native.execute(args.map { it.toByteArray() })

    /**
     * Runs one command with a deadline of its own, [timeoutMs], instead of
     * `command_timeout_ms`: it ends the whole call, blocking commands included (`BLPOP k 0`: its
     * connection is closed, so the server stops blocking it); past it
     * [sentinelrecovery.uniffi.SentinelException.Timeout]. [timeoutMs] must be in
     * 1..2147483647 (the rule every binding shares); otherwise
     * [sentinelrecovery.uniffi.SentinelException.Config], nothing sent.
     */
    suspend fun execute(timeoutMs: Long, args: List<ByteArray>): Reply =
        native.executeTimeout(args, timeoutMs.toDouble(), TimeoutUnit.MILLISECONDS)

    /** Sends commands back to back; a failed command is a [Reply.Error] in its place. */
    suspend fun pipeline(commands: List<List<ByteArray>>): List<Reply> = native.pipeline(commands)

    /**
     * [pipeline] with a deadline of its own, [timeoutMs], instead of `command_timeout_ms`: it
     * bounds the whole pipeline, which fails as a whole with
     * [sentinelrecovery.uniffi.SentinelException.Timeout] past it. [timeoutMs] keeps
     * [execute]'s rule (1..2147483647, else Config, nothing sent).
     */
    suspend fun pipeline(timeoutMs: Long, commands: List<List<ByteArray>>): List<Reply> =
        native.pipelineTimeout(commands, timeoutMs.toDouble(), TimeoutUnit.MILLISECONDS)

    /**
     * MULTI/EXEC after `WATCH watch...`; `null` when a watched key changed. `command_timeout_ms`
     * bounds the whole transaction, from the call until EXEC's reply.
     */
    suspend fun transaction(commands: List<List<ByteArray>>, watch: List<ByteArray> = emptyList()): List<Reply>? =
        native.transaction(commands, watch)

    /**
     * [transaction] with a deadline of its own, [timeoutMs], instead of `command_timeout_ms`: it
     * bounds the whole transaction, from the call until EXEC's reply. Past it
     * [sentinelrecovery.uniffi.SentinelException.Timeout], and the transaction's dedicated
     * connection is closed (an EXEC sent but not answered in time may or may not have been
     * applied). [timeoutMs] keeps [execute]'s rule (1..2147483647, else Config, nothing sent).
     */
    suspend fun transaction(
        timeoutMs: Long,
        commands: List<List<ByteArray>>,
        watch: List<ByteArray> = emptyList(),
    ): List<Reply>? = native.transactionTimeout(commands, watch, timeoutMs.toDouble(), TimeoutUnit.MILLISECONDS)

    /** The current topology; never waits on the network. */
    fun topology(): Topology = native.topology()

    /** Asks for a discovery round now. */
    fun refresh() = native.refresh()

    /** Whether the client was closed. */
    val isClosed: Boolean get() = native.isClosed()

    /**
     * Every event from the moment of collection, in order, until the collector stops or the client
     * closes (the flow then completes). The core's thread only enqueues; collection runs on the
     * collector's dispatcher.
     */
    fun events(): Flow<Event> = callbackFlow {
        val subscription = native.subscribe(object : EventListener {
            override fun onEvent(event: Event) {
                trySend(event)
            }
        })
        flows += channel
        // Closed after the subscribe: a close that ran in between found no flow to complete.
        if (native.isClosed()) channel.close()
        awaitClose {
            flows -= channel
            subscription.remove()
            subscription.close()
        }
    }.buffer(Channel.UNLIMITED)

    /**
     * Calls [listener] with every event, in order, one at a time, on [executor] (never on a core
     * thread). Closing the returned handle removes it: no call starts afterwards.
     */
    @JvmOverloads
    fun onEvent(listener: Consumer<Event>, executor: Executor = ForkJoinPool.commonPool()): AutoCloseable {
        val serial = SerialExecutor(executor)
        val subscription: Subscription = native.subscribe(object : EventListener {
            override fun onEvent(event: Event) {
                serial.execute { if (!serial.stopped) listener.accept(event) }
            }
        })
        return AutoCloseable {
            serial.stopped = true
            subscription.remove()
            subscription.close()
        }
    }

    /** Closes the client: operations in flight fail with `closed`, listeners are removed. */
    suspend fun shutdown() {
        native.shutdown()
        endFlows()
    }

    private fun endFlows() {
        for (flow in flows) flow.close()
    }

    /** [ready] for Java. */
    fun readyAsync(): CompletableFuture<Topology> = scope.future { native.ready() }

    /** [execute] for Java. */
    fun executeAsync(args: List<ByteArray>): CompletableFuture<Reply> = scope.future { native.execute(args) }

    /** [execute] with text arguments, for Java. */
    fun executeAsync(vararg args: String): CompletableFuture<Reply> {
        val bytes = args.map { it.toByteArray() }
        return scope.future { native.execute(bytes) }
    }

    /** [pipeline] for Java. */
    fun pipelineAsync(commands: List<List<ByteArray>>): CompletableFuture<List<Reply>> =
        scope.future { native.pipeline(commands) }

    /** [shutdown] for Java. */
    fun shutdownAsync(): CompletableFuture<Unit> = scope.future { shutdown() }

    /**
     * Closes the client and waits until that is complete. Idempotent; later calls fail with
     * `closed` (the native object itself is freed by its cleaner once unreachable).
     */
    override fun close() {
        native.shutdownBlocking()
        endFlows()
    }
}

/** Runs tasks on [executor] one at a time, in submission order (events stay ordered). */
private class SerialExecutor(private val executor: Executor) : Executor {
    private val queue = java.util.ArrayDeque<Runnable>()
    private var running = false
    @Volatile
    var stopped = false

    override fun execute(task: Runnable) {
        synchronized(queue) {
            queue.add(task)
            if (running) return
            running = true
        }
        executor.execute(::drain)
    }

    private fun drain() {
        while (true) {
            val next = synchronized(queue) {
                queue.poll() ?: run {
                    running = false
                    null
                }
            } ?: return
            next.run()
        }
    }
}
