// Application pub/sub for Kotlin (a Flow of messages, suspend next) and Java (CompletableFuture):
// the core's subscription, which follows failovers; messages are at-most-once.
package sentinelrecovery

import java.util.concurrent.CompletableFuture
import kotlinx.coroutines.CoroutineScope
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.SupervisorJob
import kotlinx.coroutines.flow.Flow
import kotlinx.coroutines.flow.flow
import kotlinx.coroutines.future.future
import sentinelrecovery.uniffi.Message
import sentinelrecovery.uniffi.PubSub

/**
 * A subscription on a connection of the core's own. After a lost connection or a failover the
 * core subscribes everything again on the new node (`subscription_lost`, then
 * `subscription_restored` events of the client); what was published in between is not received.
 * At most the buffer's size of messages wait here; beyond that the newest are dropped ([dropped]).
 */
class PubSubscription internal constructor(private val native: PubSub) : AutoCloseable {
    private val scope = CoroutineScope(SupervisorJob() + Dispatchers.Default)

    /** The next message, waiting for one; null once closed. */
    suspend fun next(): Message? = native.next()

    /** Every message until the subscription is closed. */
    fun messages(): Flow<Message> = flow {
        while (true) emit(native.next() ?: break)
    }

    /** Adds channels. */
    suspend fun subscribe(vararg channels: String) = native.subscribe(channels.map { it.toByteArray() })

    /** Adds glob-style patterns. */
    suspend fun psubscribe(vararg patterns: String) = native.psubscribe(patterns.map { it.toByteArray() })

    /** Removes channels; none of their messages is returned once this completes. */
    suspend fun unsubscribe(vararg channels: String) = native.unsubscribe(channels.map { it.toByteArray() })

    /** Messages dropped because the buffer was full. */
    val dropped: Long get() = native.dropped().toLong()

    /** [next] for Java. */
    fun nextAsync(): CompletableFuture<Message?> = scope.future { native.next() }

    /** Closes the subscription and its connection; a waiting [next] returns null. */
    override fun close() {
        native.unsubscribeAll()
    }
}
