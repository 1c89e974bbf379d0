// The JVM host-responsiveness probe (DESIGN.md "Why it exists", 1, on the JVM): a dedicated
// thread submits one probe every 50 ms to Dispatchers.Default and one to
// ForkJoinPool.commonPool() and records how late each starts. Meanwhile N clients follow a
// service the reachable sentinels do not know, through six sentinels of which three are stopped
// (SIGSTOP: they accept connections and never answer), so discovery fails and retries for the
// whole run; each client sends a command every 500 ms from a coroutine on Dispatchers.Default and
// collects its events as a Flow there.
//
//   java -cp ... ProbeKt URL CLIENTS SECONDS      (bench/jvm/run.sh starts the topology)
//
// Probing starts after a 2 s warm-up and lasts SECONDS.
import java.util.concurrent.ConcurrentLinkedQueue
import java.util.concurrent.Executors
import java.util.concurrent.ForkJoinPool
import java.util.concurrent.TimeUnit
import java.util.concurrent.atomic.AtomicLong
import kotlinx.coroutines.CoroutineScope
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.SupervisorJob
import kotlinx.coroutines.cancel
import kotlinx.coroutines.delay
import kotlinx.coroutines.isActive
import kotlinx.coroutines.launch
import sentinelrecovery.SentinelClient
import sentinelrecovery.errorCode
import sentinelrecovery.uniffi.SentinelException

/** Probes submitted at a time; each records its lateness once it runs. */
class Probes(private val name: String) {
    private val submitted = ConcurrentLinkedQueue<Long>()
    private val delays = ConcurrentLinkedQueue<Long>()
    private val ran = java.util.concurrent.ConcurrentHashMap.newKeySet<Long>()

    fun submit(run: (Runnable) -> Unit) {
        val at = System.nanoTime()
        submitted += at
        run(Runnable {
            delays += System.nanoTime() - at
            ran += at
        })
    }

    /** `"name": {...}` with p50/p99/max in ms; a probe not run by now counts with its wait so far. */
    fun json(): String {
        val now = System.nanoTime()
        val notRun = submitted.filter { it !in ran }
        val all = (delays + notRun.map { now - it }).sorted()
        fun ms(ns: Long) = "%.2f".format(ns / 1e6)
        fun pct(p: Double) = all[((all.size - 1) * p).toInt()]
        return "\"$name\":{\"probes\":${all.size},\"not_run\":${notRun.size},\"p50_ms\":${ms(pct(0.5))}," +
            "\"p99_ms\":${ms(pct(0.99))},\"max_ms\":${ms(all.last())}}"
    }
}

fun main(args: Array<String>) {
    val url = args[0]
    val clients = args[1].toInt()
    val seconds = args[2].toLong()
    val scope = CoroutineScope(SupervisorJob() + Dispatchers.Default)
    val done = AtomicLong()
    val failed = AtomicLong()
    val events = AtomicLong()
    val codes = java.util.concurrent.ConcurrentHashMap<String, AtomicLong>()
    val options = mapOf("command_timeout_ms" to "1000", "retry_max_ms" to "1000")
    val opened = (1..clients).map { SentinelClient.connect(url, options) }
    for (c in opened) {
        scope.launch { c.events().collect { events.incrementAndGet() } }
        scope.launch {
            while (isActive) {
                try {
                    c.execute("GET", "k")
                    done.incrementAndGet()
                } catch (e: SentinelException) {
                    failed.incrementAndGet()
                    codes.computeIfAbsent(e.errorCode) { AtomicLong() }.incrementAndGet()
                }
                delay(500)
            }
        }
    }
    // Warm-up (as the Node bench): clients connected, class loading and the JIT's first rounds done.
    Thread.sleep(2000)
    val default = Probes("dispatchers_default")
    val common = Probes("fork_join_common_pool")
    // The probing thread's own lateness against its fixed-rate schedule: when it is as late as the
    // pools' probes, the whole process was off the CPU (machine load, a GC pause), not the pools busy.
    val prober = Executors.newSingleThreadScheduledExecutor { Thread(it, "probe").apply { isDaemon = true } }
    val start = System.nanoTime()
    val tick = AtomicLong()
    var proberLateMax = 0L
    prober.scheduleAtFixedRate({
        val late = System.nanoTime() - (start + tick.getAndIncrement() * 50_000_000L)
        if (late > proberLateMax) proberLateMax = late
        default.submit { r -> scope.launch { r.run() } }
        common.submit { r -> ForkJoinPool.commonPool().execute(r) }
    }, 0, 50, TimeUnit.MILLISECONDS)
    Thread.sleep(TimeUnit.SECONDS.toMillis(seconds))
    prober.shutdownNow()
    prober.awaitTermination(1, TimeUnit.SECONDS)
    val threads = Thread.getAllStackTraces().size
    val gcMs = java.lang.management.ManagementFactory.getGarbageCollectorMXBeans().sumOf { it.collectionTime }
    val osThreads = java.io.File("/proc/self/task").list()?.size ?: -1
    val line = "{\"clients\":$clients,\"seconds\":$seconds,${default.json()},${common.json()}," +
        "\"prober_thread_late_max_ms\":${"%.2f".format(proberLateMax / 1e6)},\"gc_pause_total_ms\":$gcMs," +
        "\"commands_done\":${done.get()},\"commands_failed\":${failed.get()}," +
        "\"error_codes\":{${codes.entries.joinToString(",") { "\"${it.key}\":${it.value.get()}" }}}," +
        "\"events\":${events.get()},\"jvm_threads\":$threads,\"os_threads\":$osThreads," +
        "\"cpus\":${Runtime.getRuntime().availableProcessors()}}"
    scope.cancel()
    opened.forEach { it.close() }
    println(line)
}
