// The JVM binding against real topologies: commands and typed replies, errors by code, events
// through a kill -9 failover, close.
package sentinelrecovery

import java.util.Collections
import java.util.concurrent.atomic.AtomicInteger
import kotlinx.coroutines.CoroutineStart
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.async
import kotlinx.coroutines.delay
import kotlinx.coroutines.flow.toList
import kotlinx.coroutines.isActive
import kotlinx.coroutines.launch
import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.withTimeout
import sentinelrecovery.uniffi.DoctorReport
import sentinelrecovery.uniffi.Event
import sentinelrecovery.uniffi.EventDetail
import sentinelrecovery.uniffi.Reply
import sentinelrecovery.uniffi.SentinelException

private lateinit var shared: TestTopology

/** Runs [block] and returns the SentinelException it threw. */
private suspend fun failure(block: suspend () -> Unit): SentinelException {
    try {
        block()
    } catch (e: SentinelException) {
        return e
    }
    throw Failure("no SentinelException was thrown")
}

private fun typedReplies() = runBlocking {
    SentinelClient.connect(shared.url, mapOf("protocol" to "3")).use { c ->
        val topology = c.ready()
        expectEqual(shared.primaryPort, topology.primary?.port?.toInt(), "ready's primary")
        expectEqual(Reply.Simple("OK"), c.execute("SET", "kt:k", "v"), "SET")
        val got = c.execute("GET", "kt:k") as Reply.Bulk
        expectEqual("v", String(got.value), "GET")
        expectEqual(Reply.Nil, c.execute("GET", "kt:missing"), "GET of a missing key")
        expectEqual(Reply.Int(3L), c.execute("RPUSH", "kt:list", "a", "b", "c"), "RPUSH")
        c.execute("DEL", "kt:list")
        c.execute("RPUSH", "kt:list2", "a", "b")
        val range = c.execute("LRANGE", "kt:list2", "0", "-1") as Reply.Array
        expectEqual(listOf("a", "b"), range.items.map(::text), "LRANGE")
        c.execute("DEL", "kt:list2")
        c.execute("HSET", "kt:h", "f", "1")
        val map = c.execute("HGETALL", "kt:h") as Reply.Map
        expectEqual(listOf("f" to "1"), map.entries.map { text(it.key) to text(it.value) }, "HGETALL (RESP3 map)")
        c.execute("ZADD", "kt:z", "1.5", "m")
        expectEqual(Reply.Double(1.5), c.execute("ZSCORE", "kt:z", "m"), "ZSCORE (RESP3 double)")
        // Binary-safe: every byte value round-trips.
        val bytes = ByteArray(256) { it.toByte() }
        c.execute(listOf("SET".toByteArray(), "kt:bin".toByteArray(), bytes))
        val back = c.execute(listOf("GET".toByteArray(), "kt:bin".toByteArray())) as Reply.Bulk
        expect(back.value.contentEquals(bytes)) { "binary value changed" }
    }
}

private fun pipelineAndTransaction() = runBlocking {
    SentinelClient.connect(shared.url).use { c ->
        val replies = c.pipeline(
            listOf(
                listOf("SET", "kt:p", "1"),
                listOf("INCR", "kt:p"),
                listOf("NOSUCHCOMMAND"),
                listOf("GET", "kt:p"),
            ).map { cmd -> cmd.map { it.toByteArray() } }
        )
        expectEqual(4, replies.size, "pipeline replies")
        expectEqual(Reply.Int(2L), replies[1], "INCR in the pipeline")
        val error = replies[2] as Reply.Error
        expectEqual("server", error.code, "failed command's code")
        expectEqual("ERR", error.serverCode, "failed command's server code")
        expectEqual("2", text(replies[3]), "GET in the pipeline")
        val tx = c.transaction(listOf(listOf("INCR", "kt:p"), listOf("GET", "kt:p")).map { cmd -> cmd.map { it.toByteArray() } })
        expectEqual(2, tx?.size, "transaction replies")
        expectEqual(Reply.Int(3L), tx!![0], "INCR in the transaction")
        expectEqual("3", text(tx[1]), "GET in the transaction")
    }
}

private fun errorsByCode() = runBlocking {
    val bad = try {
        SentinelClient.connect("redis+sentinel://127.0.0.1:26379/mymaster", mapOf("command_timeout_ms" to "soon"))
        null
    } catch (e: SentinelException) {
        e
    }
    expect(bad is SentinelException.Config) { "a bad option: $bad" }
    expectEqual("config", bad!!.errorCode, "bad option's code")
    expect(bad.message!!.contains("command_timeout_ms")) { "the message names the option: ${bad.message}" }

    SentinelClient.connect(shared.url).use { c ->
        val server = failure { c.execute("NOSUCHCOMMAND") }
        expect(server is SentinelException.Server) { "unknown command: $server" }
        expectEqual("server", server.errorCode, "unknown command's code")
        expectEqual("ERR", (server as SentinelException.Server).serverCode, "server code")
        c.execute("SET", "kt:str", "x")
        val wrongType = failure { c.execute("LPUSH", "kt:str", "y") }
        expectEqual("WRONGTYPE", (wrongType as SentinelException.Server).serverCode, "WRONGTYPE server code")
    }

    val port = TestTopology.refusingPort()
    SentinelClient.connect(
        "redis+sentinel://127.0.0.1:$port/mymaster",
        mapOf("command_timeout_ms" to "500", "sentinel_timeout_ms" to "200"),
    ).use { c ->
        val unreachable = failure { c.ready() }
        expectEqual("sentinels_unreachable", unreachable.errorCode, "no sentinel listening")
    }

    // Every code of the core's table is a class of its own, named by its code.
    expectEqual(14, ERROR_CODES.size, "codes in the table")
    expect(ERROR_CODES.containsKey("no_healthy_primary") && EVENT_KINDS.containsKey("primary_changed")) { "tables" }
}

private fun closeCompletesInFlightWithClosed() = runBlocking {
    val c = SentinelClient.connect(shared.url)
    c.ready()
    // UNDISPATCHED: the BLPOP is started before `async` returns, so it is in flight at close.
    val blocked = async(Dispatchers.Default, CoroutineStart.UNDISPATCHED) {
        runCatching { c.execute("BLPOP", "kt:never", "0") }
    }
    // Unconfined: the flow's producer subscribes before `async` returns.
    val events = async(Dispatchers.Unconfined, CoroutineStart.UNDISPATCHED) { c.events().toList() }
    expect(!blocked.isCompleted) { "BLPOP 0 completed before close" }
    c.close()
    val error = blocked.await().exceptionOrNull()
    expect(error is SentinelException.Closed) { "in-flight BLPOP after close: $error" }
    expectEqual("closed", (error as SentinelException).errorCode, "code")
    // The events flow completes when the client closes.
    withTimeout(10_000) { events.await() }
    expect(c.isClosed) { "isClosed" }
}

private fun operationsAfterCloseFailWithClosed() = runBlocking {
    val c = SentinelClient.connect(shared.url)
    c.shutdown()
    val after = failure { c.execute("PING") }
    expectEqual("closed", after.errorCode, "after shutdown")
    c.close() // idempotent
}

private fun eventsThroughKill9Failover() = runBlocking {
    TestTopology().use { t ->
        SentinelClient.connect(t.url, mapOf("command_timeout_ms" to "3000")).use { c ->
            c.ready()
            val events = Collections.synchronizedList(mutableListOf<Event>())
            val collector = launch(Dispatchers.Default) { c.events().collect { events += it } }
            val acked = AtomicInteger()
            val errors = Collections.synchronizedList(mutableListOf<String>())
            val writers = (1..8).map {
                launch(Dispatchers.Default) {
                    while (isActive) {
                        try {
                            c.execute("INCR", "kt:counter")
                            acked.incrementAndGet()
                        } catch (e: SentinelException) {
                            errors += e.errorCode
                            delay(5)
                        }
                    }
                }
            }
            waitUntil(10, "writes before the kill") { acked.get() > 100 }
            t.cmd("kill9 ${t.primaryPort}")
            val newPort = TestTopology.portOf(t.cmd("wait-primary-not ${t.primaryPort} 30000", 40))
            waitUntil(30, "primary_changed to the new primary") {
                events.any { val d = it.detail; d is EventDetail.PrimaryChanged && d.new.port.toInt() == newPort }
            }
            val afterSwitch = acked.get()
            waitUntil(20, "writes after the switch") { acked.get() > afterSwitch + 100 }
            writers.forEach { it.cancel() }
            writers.forEach { it.join() }
            collector.cancel()
            expectEqual(newPort, c.topology().primary?.port?.toInt(), "topology's primary")
            val kinds = events.map { it.kind }
            expect("connection_lost" in kinds) { "connection_lost among $kinds" }
            val allowed = setOf("timeout", "connection_lost")
            expect(errors.all { it in allowed }) { "only timeout/connection_lost reach the caller: ${errors.toSet()}" }
            expect(kinds.all { it in EVENT_KINDS }) { "kinds from the shared table: $kinds" }
            val lost = kinds.indexOf("connection_lost")
            val changed = events.indexOfFirst { val d = it.detail; d is EventDetail.PrimaryChanged && d.new.port.toInt() == newPort }
            expect(lost < changed) { "connection_lost before primary_changed: $kinds" }
        }
    }
}

private fun noCallAfterRemoval() = runBlocking {
    SentinelClient.connect(shared.url).use { c ->
        c.ready()
        val kept = Collections.synchronizedList(mutableListOf<Event>())
        val removedCalls = AtomicInteger()
        val keep = c.onEvent({ kept += it })
        val removed = c.onEvent({ removedCalls.incrementAndGet() })
        removed.close()
        val atRemoval = removedCalls.get()
        shared.cmd("add-sentinel")
        c.refresh()
        waitUntil(20, "sentinels_changed at the listener still installed") {
            kept.any { it.kind == "sentinels_changed" }
        }
        keep.close()
        expectEqual(atRemoval, removedCalls.get(), "calls of the removed listener")
    }
}

private fun pubsubThroughKill9Failover() = runBlocking {
    TestTopology().use { t ->
        SentinelClient.connect(t.url, mapOf("command_timeout_ms" to "3000")).use { c ->
            c.ready()
            val kinds = Collections.synchronizedList(mutableListOf<String>())
            val listener = c.onEvent({ kinds += it.kind })
            c.subscribe(listOf("kt:news")).use { sub ->
                c.execute("PUBLISH", "kt:news", "before")
                val first = withTimeout(10_000) { sub.next() }
                expectEqual("before", first?.payload?.let { String(it) }, "message before the failover")
                expectEqual("kt:news", first?.channel?.let { String(it) }, "its channel")
                t.cmd("kill9 ${t.primaryPort}")
                waitUntil(40, "subscription_restored after the kill") { "subscription_restored" in kinds }
                val lostAt = kinds.indexOf("subscription_lost")
                expect(lostAt >= 0 && lostAt < kinds.indexOf("subscription_restored")) { "lost before restored: $kinds" }
                // At-most-once: publish until one arrives on the new primary; count what the gap lost.
                var published = 0
                var received: String? = null
                while (received == null && published < 50) {
                    c.execute("PUBLISH", "kt:news", "after-$published")
                    published++
                    received = kotlinx.coroutines.withTimeoutOrNull(500) { sub.next() }?.payload?.let { String(it) }
                }
                expect(received != null && received.startsWith("after-")) { "a message after the failover: $received" }
                println("    pub/sub: $published published after the restore until one arrived; dropped ${sub.dropped}")
            }
            listener.close()
        }
    }
}

private fun doctorOfAHealthyTopology() = runBlocking {
    val report = SentinelDoctor.run(shared.url)
    expectEqual("healthy", report.status, "doctor status (${report.text})")
    expectEqual(0.toUByte(), report.exitCode, "doctor exit code")
    expect(report.json.contains("\"schema\"")) { "doctor JSON: ${report.json.take(200)}" }
    val bad = failure { SentinelDoctor.run("redis://not-sentinel/x") }
    expectEqual("config", bad.errorCode, "doctor with a bad URL")
}

/** A doctor case's `command`: "-" for no options, or "watch=SECONDS" as milliseconds. */
private fun doctorWatchMs(name: String, spec: String): Double? {
    if (spec == "-") return null
    expect(spec.startsWith("watch=")) { "$name: doctor options $spec" }
    return spec.removePrefix("watch=").toDouble() * 1000
}

/**
 * The shared doctor option cases (tests/cases/doctor_options.tsv; the rule is the core's
 * `doctor::Options::from_host`): `watchMs` and `pings` of [SentinelDoctor.run]. Accepted: a
 * report comes; refused: the `config` error naming the option. An Int cannot hold a fraction or
 * NaN pings: those cases are skipped, saying so.
 */
private fun doctorOptionCases() = runBlocking {
    for ((watch, pings, expected) in caseRows("doctor_options.tsv", 3, 10)) {
        val name = "$watch/$pings"
        expect(expected in setOf("accepted", "refused")) { "$name: expect $expected" }
        if (pings != "-" && pings.toDoubleOrNull()?.let { it != Math.floor(it) || it.isNaN() } != false) {
            println("    skip $name: an Int pings cannot hold $pings")
            continue
        }
        val watchMs = if (watch == "-") null else watch.toDouble()
        val count = if (pings == "-") null else pings.toInt()
        val outcome: Any = try {
            SentinelDoctor.run(shared.url, watchMs = watchMs, pings = count)
        } catch (e: SentinelException) {
            e
        }
        if (expected == "accepted") {
            expect(outcome is DoctorReport) { "$name: expected a report, got $outcome" }
        } else {
            val e = outcome as? SentinelException ?: throw Failure("$name: expected a config error, got $outcome")
            expectEqual("config", e.errorCode, "$name: the error's code")
            val named = if (watch != "-") "watch must be" else "pings must be"
            expect(e.message?.contains(named) == true) { "$name: the message names the option: ${e.message}" }
        }
        println("    $name: $expected")
    }
}

/**
 * The rows of a shared cases file (tests/cases/[name], which every binding's suite reads; the
 * suite runs from the repository root): its lines that are neither blank nor comments, split at
 * tabs, each with [fields] fields, and at least [atLeast] of them.
 */
private fun caseRows(name: String, fields: Int, atLeast: Int): List<List<String>> {
    val file = java.io.File("tests/cases/$name")
    val rows = file.readLines().filter { it.isNotBlank() && !it.startsWith("#") }.map { it.split("\t") }
    for (row in rows) expectEqual(fields, row.size, "$file: tab-separated fields of $row")
    expect(rows.size >= atLeast) { "$file: ${rows.size} cases" }
    return rows
}

/**
 * The shared deadline cases (tests/cases/deadlines.tsv, which every binding's suite reads; its
 * header describes the columns): each call ends by its deadline with the expected outcome, and
 * afterwards no client is left blocked on the server (a timed-out blocking command's connection
 * was closed). Commands through `execute`, pipelines through `pipeline` and transactions through
 * `transaction` (each with `timeoutMs` per call, which bounds the whole pipeline or transaction),
 * subscriptions through `subscribe` (under the client's command_timeout_ms), the doctor through
 * [SentinelDoctor.run] with connect_timeout_ms (its report's status), and cancellation by
 * cancelling the calling coroutine. The doctor has no watch option: its watch row is skipped. "paused" cases stop the current primary of a
 * topology whose down-after (60 s) is far longer than the case, "failover" cases stall a failover
 * (sr-topology's stall-failover); both undo it afterwards and check that the same client works.
 */
private fun deadlineCases() = runBlocking {
    val cases = caseRows("deadlines.tsv", 8, 18)
    // A down-after far longer than any case: a paused primary stays the primary (no failover); a
    // failover-timeout as long: a stalled failover is not aborted while a case runs.
    TestTopology("--replicas", "1", "--down-after", "60000", "--failover-timeout", "60000").use { topo ->
        SentinelClient.connect(topo.url, emptyMap()).use { observer ->
            observer.ready()
            fun blockedClients(): Long = runBlocking {
                text(observer.execute("INFO", "clients")).lines()
                    .first { it.startsWith("blocked_clients:") }
                    .substringAfter(':').trim().toLong()
            }
            for ((serial, f) in cases.withIndex()) {
                val (name, kind, deadline, state) = f
                expect(kind in setOf("command", "pipeline", "transaction", "subscribe", "doctor")) { "$name: kind $kind" }
                expect(f[6] in setOf("timeout", "nil", "config", "cancelled", "failure")) { "$name: expect ${f[6]}" }
                val timeoutMs = f[4].toLong()
                val expected = f[6]
                val perCall = deadline == "per-call"
                // A doctor's steps each wait for at most a connect and one reply: 3 x its timeout.
                val budget = if (kind == "doctor" && deadline == "default") {
                    3 * timeoutMs + 1000
                } else {
                    timeoutMs + (if (deadline == "default") f[5].toLong() else 0) + 1000
                }
                val key = "deadline-case:$name:$serial"
                val commands = f[7].split(" ; ").map { c -> c.split(" ").map { it.replace("{key}", key).toByteArray() } }
                // A doctor case's deadline is the doctor's connect_timeout_ms, not this client's.
                val defaultMs = if (deadline == "default" && kind != "doctor") timeoutMs else 30000
                // A no-primary client's only sentinel is a loopback port nobody listens on.
                val url = if (state == "no-primary") "redis+sentinel://127.0.0.1:1/mymaster" else topo.url
                SentinelClient.connect(url, mapOf("command_timeout_ms" to defaultMs.toString())).use { c ->
                    if (state != "no-primary") c.ready()
                    val before = blockedClients()
                    // The fault's undoing while it is in place: "cont PORT" or "release-failover PORT".
                    var undo: String? = null
                    if (state == "paused") {
                        val port = TestTopology.portOf(topo.cmd("primary"))
                        topo.cmd("stop $port")
                        undo = "cont $port"
                    } else if (state == "failover") {
                        undo = "release-failover ${TestTopology.portOf(topo.cmd("stall-failover"))} 30000"
                    }
                    try {
                        val start = System.nanoTime()
                        val call = async(start = CoroutineStart.UNDISPATCHED) {
                            try {
                                when (kind) {
                                    "command" -> if (perCall) c.execute(timeoutMs, commands[0]) else c.execute(commands[0])
                                    "pipeline" -> if (perCall) c.pipeline(timeoutMs, commands) else c.pipeline(commands)
                                    "transaction" -> if (perCall) c.transaction(timeoutMs, commands) else c.transaction(commands)
                                    // Its deadline is the client's command_timeout_ms; made anyway, it is closed.
                                    "subscribe" -> c.subscribe(commands[0].drop(1).map { String(it) }).close()
                                    else -> SentinelDoctor.run(
                                        url,
                                        mapOf("connect_timeout_ms" to timeoutMs.toString()),
                                        watchMs = doctorWatchMs(name, f[7]),
                                    )
                                }
                            } catch (e: SentinelException) {
                                e
                            }
                        }
                        val outcome: Any? = if (deadline == "cancel") {
                            delay(timeoutMs)
                            call.cancel()
                            runCatching { call.await() }.exceptionOrNull()
                        } else {
                            call.await()
                        }
                        val took = (System.nanoTime() - start) / 1_000_000
                        println("    $name: ended after $took ms (allowed $budget ms)")
                        undo?.let { line ->
                            undo = null
                            topo.cmd(line, 40)
                        }
                        expect(took <= budget) { "$name: ended after $took ms (allowed $budget ms)" }
                        when (expected) {
                            "nil" -> expectEqual<Any?>(Reply.Nil, outcome, "$name: the reply")
                            "cancelled" -> expect(outcome is kotlinx.coroutines.CancellationException) {
                                "$name: expected a CancellationException, got $outcome"
                            }
                            "failure" -> {
                                expect(outcome is sentinelrecovery.uniffi.DoctorReport) { "$name: expected a report, got $outcome" }
                                val report = outcome as sentinelrecovery.uniffi.DoctorReport
                                expectEqual("failure", report.status, "$name: the report's status (${report.text})")
                            }
                            else -> {
                                expect(outcome is SentinelException) { "$name: expected $expected, got $outcome" }
                                expectEqual(expected, (outcome as SentinelException).errorCode, "$name: error code")
                            }
                        }
                        if (state == "paused" || state == "failover") {
                            expectEqual<Any>(Reply.Simple("PONG"), c.execute(10000, listOf("PING".toByteArray())), "$name: PING after the fault")
                        }
                    } finally {
                        undo?.let { line -> runCatching { topo.cmd(line, 40) } }
                    }
                    waitUntil(5, "$name: no client blocked on the server") { blockedClients() <= before }
                }
            }
        }
    }
}

/**
 * The shared per-call timeout cases (tests/cases/timeouts.tsv; the rule lives in the core's
 * deadline module): each value as `execute(timeoutMs, ...)`. answers: the GET answers; accepted:
 * it answers or times out (a deadline too short for a busy machine); refused:
 * [SentinelException.Config] whose message starts "timeout must be", nothing sent. A Long cannot
 * hold fractions, NaN or inf: those cases are skipped, saying so.
 */
private fun timeoutCases() = runBlocking {
    val cases = caseRows("timeouts.tsv", 3, 8)
    SentinelClient.connect(shared.url, emptyMap()).use { c ->
        c.ready()
        for (f in cases) {
            val ms = if (f[0] == "inf") Double.POSITIVE_INFINITY else f[0].toDouble()
            if (ms.isNaN() || ms.isInfinite() || ms != Math.floor(ms)) {
                println("    skip ${f[0]}: a Long timeoutMs cannot hold it (${f[2]})")
                continue
            }
            val outcome: Any = try {
                c.execute(ms.toLong(), listOf("GET".toByteArray(), "timeout-case:absent".toByteArray()))
            } catch (e: SentinelException) {
                e
            }
            val timedOut = outcome is SentinelException.Timeout
            if (f[1] == "answers" || (f[1] == "accepted" && !timedOut)) {
                expectEqual<Any>(Reply.Nil, outcome, "${f[0]} ms (${f[2]})")
            } else if (f[1] == "refused") {
                expect(outcome is SentinelException.Config) { "${f[0]} ms (${f[2]}): $outcome" }
                val message = (outcome as SentinelException).message ?: ""
                expect(message.contains("timeout must be")) { "${f[0]} ms: $message" }
            }
        }
    }
}

fun main() {
    shared = TestTopology()
    try {
        runTests(
            "kotlin",
            listOf(
                "typed replies (RESP3)" to ::typedReplies,
                "the shared deadline cases" to ::deadlineCases,
                "the shared timeout cases" to ::timeoutCases,
                "pipeline and transaction" to ::pipelineAndTransaction,
                "errors by code" to ::errorsByCode,
                "close completes in-flight with closed" to ::closeCompletesInFlightWithClosed,
                "operations after close fail with closed" to ::operationsAfterCloseFailWithClosed,
                "no call after removal" to ::noCallAfterRemoval,
                "doctor of a healthy topology" to ::doctorOfAHealthyTopology,
                "the shared doctor option cases" to ::doctorOptionCases,
                "pub/sub through a kill -9 failover" to ::pubsubThroughKill9Failover,
                "events through a kill -9 failover" to ::eventsThroughKill9Failover,
                "proxy: bad options name the key" to ::proxyBadOptionsNameTheKey,
                "proxy: close ends its sessions" to { proxyCloseEndsItsSessions(shared.url) },
                "proxy: on a Unix socket" to { proxyOnAUnixSocket(shared.url) },
                "proxy: plain RESP through a planned failover" to ::proxyThroughPlannedFailover,
            ),
        )
    } finally {
        shared.close()
    }
}
