// The diagnosis of `sentinel-recovery doctor` as an API for Kotlin (suspend) and Java
// (CompletableFuture); it runs on the core's threads with a client's URL and options.
package sentinelrecovery

import java.util.concurrent.CompletableFuture
import kotlinx.coroutines.CoroutineScope
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.SupervisorJob
import kotlinx.coroutines.future.future
import sentinelrecovery.uniffi.DoctorReport

/** Diagnoses a Sentinel deployment: `report.exitCode` 0 healthy, 1 warnings, 2 failures. */
object SentinelDoctor {
    private val scope = CoroutineScope(SupervisorJob() + Dispatchers.Default)

    /** The report (JSON in the documented schema, text, status, exit code) of `url`'s deployment. */
    suspend fun run(url: String, options: Map<String, String> = emptyMap()): DoctorReport =
        sentinelrecovery.uniffi.doctor(url, options)

    /** [run] for Java. */
    @JvmStatic
    @JvmOverloads
    fun runAsync(url: String, options: Map<String, String> = emptyMap()): CompletableFuture<DoctorReport> =
        scope.future { run(url, options) }
}
