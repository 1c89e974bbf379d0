// The diagnosis of `sentinel-recovery doctor` as an API for Kotlin (suspend) and Java
// (CompletableFuture); it runs on the core's threads with a client's URL and options.
package sentinelrecovery

import java.util.concurrent.CompletableFuture
import kotlinx.coroutines.CoroutineScope
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.SupervisorJob
import kotlinx.coroutines.future.future
import sentinelrecovery.uniffi.DoctorReport
import sentinelrecovery.uniffi.TimeoutUnit

/** Diagnoses a Sentinel deployment: `report.exitCode` 0 healthy, 1 warnings, 2 failures. */
object SentinelDoctor {
    private val scope = CoroutineScope(SupervisorJob() + Dispatchers.Default)

    /**
     * The report (JSON in the documented schema, text, status, exit code) of `url`'s deployment.
     * `watchMs` (null: no sampling; more than 0, at most 3600000) samples a PING every 100 ms per
     * sentinel for that long; `pings` (null: 10; 1 to 1000) sets the PINGs per sentinel. Out of
     * range they throw the `config` error naming the option (the rule every binding keeps).
     * Cancelling the coroutine stops the diagnosis.
     */
    suspend fun run(
        url: String,
        options: Map<String, String> = emptyMap(),
        watchMs: Double? = null,
        pings: Int? = null,
    ): DoctorReport = sentinelrecovery.uniffi.doctor(url, options, watchMs, pings?.toDouble(), TimeoutUnit.MILLISECONDS)

    /** [run] for Java (cancelling the future stops the diagnosis). */
    @JvmStatic
    @JvmOverloads
    fun runAsync(
        url: String,
        options: Map<String, String> = emptyMap(),
        watchMs: Double? = null,
        pings: Int? = null,
    ): CompletableFuture<DoctorReport> = scope.future { run(url, options, watchMs, pings) }
}
