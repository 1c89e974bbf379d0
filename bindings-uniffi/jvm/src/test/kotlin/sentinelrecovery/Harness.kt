// The test harness: real topologies from the testkit's `sr-topology` (one JSON line per stdin
// command), waits on states, and a tiny runner (no test framework jar is needed offline).
package sentinelrecovery

import java.io.BufferedReader
import java.io.InputStreamReader
import java.io.Writer
import java.net.ServerSocket
import java.util.concurrent.LinkedBlockingQueue
import java.util.concurrent.TimeUnit

/** One running `sr-topology up --json`. */
class TestTopology(vararg args: String) : AutoCloseable {
    private val process: Process
    private val stdin: Writer
    private val lines = LinkedBlockingQueue<String>()
    val url: String
    val primaryPort: Int

    init {
        val target = System.getenv("CARGO_TARGET_DIR") ?: error("CARGO_TARGET_DIR must be set")
        val binary = System.getenv("SR_TOPOLOGY") ?: "$target/debug/sr-topology"
        process = ProcessBuilder(listOf(binary, "up", "--json") + args)
            .redirectError(ProcessBuilder.Redirect.INHERIT)
            .start()
        stdin = process.outputStream.writer()
        val reader = BufferedReader(InputStreamReader(process.inputStream))
        Thread {
            while (true) {
                val line = reader.readLine() ?: break
                lines.put(line)
            }
            lines.put(EOF)
        }.apply { isDaemon = true }.start()
        val first = line(60)
        url = Regex("\"url\":\"([^\"]+)\"").find(first)?.groupValues?.get(1) ?: error("no url in $first")
        primaryPort = portOf(Regex("\"primary\":\\{[^}]*\\}").find(first)?.value ?: error("no primary in $first"))
    }

    private fun line(seconds: Long): String {
        val line = lines.poll(seconds, TimeUnit.SECONDS) ?: error("sr-topology gave no answer within ${seconds}s")
        check(line != EOF) { "sr-topology exited" }
        return line
    }

    /** Sends one command and returns its answer line, asserting `"ok":true`. */
    fun cmd(command: String, seconds: Long = 60): String {
        stdin.write(command + "\n")
        stdin.flush()
        val answer = line(seconds)
        check(answer.contains("\"ok\":true")) { "$command: $answer" }
        return answer
    }

    override fun close() {
        runCatching { stdin.close() } // EOF stops everything
        if (!process.waitFor(30, TimeUnit.SECONDS)) {
            process.destroyForcibly()
            process.waitFor()
        }
    }

    companion object {
        private const val EOF = "\u0000eof"

        /** The `"port":N` of a JSON object's text. */
        fun portOf(json: String): Int =
            Regex("\"port\":(\\d+)").find(json)?.groupValues?.get(1)?.toInt() ?: error("no port in $json")

        /** A loopback port nobody listens on. */
        fun refusingPort(): Int = ServerSocket(0).use { it.localPort }
    }
}

/** Polls [predicate] until it is true; fails after [seconds]. */
fun waitUntil(seconds: Long, what: String, predicate: () -> Boolean) {
    val deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds)
    while (!predicate()) {
        check(System.nanoTime() < deadline) { "timed out after ${seconds}s waiting for $what" }
        Thread.sleep(20)
    }
}

/** A failed expectation. */
class Failure(message: String) : AssertionError(message)

fun expect(condition: Boolean, message: () -> String) {
    if (!condition) throw Failure(message())
}

fun <T> expectEqual(expected: T, actual: T, what: String) {
    expect(expected == actual) { "$what: expected $expected, got $actual" }
}

/** Runs each named test, prints one line per test and a summary; exits 1 if any failed. */
fun runTests(suite: String, tests: List<Pair<String, () -> Unit>>) {
    val only = System.getenv("TEST_FILTER")
    var passed = 0
    val failed = mutableListOf<String>()
    for ((name, test) in tests) {
        if (only != null && !name.contains(only)) continue
        val start = System.nanoTime()
        try {
            test()
            passed++
            println("ok   $suite: $name (${(System.nanoTime() - start) / 1_000_000} ms)")
        } catch (e: Throwable) {
            failed += name
            println("FAIL $suite: $name")
            e.printStackTrace(System.out)
        }
    }
    println("$suite: ${passed} passed, ${failed.size} failed")
    if (failed.isNotEmpty()) kotlin.system.exitProcess(1)
}

/** The text of a bulk, simple or verbatim (RESP3, e.g. INFO) reply. */
fun text(reply: sentinelrecovery.uniffi.Reply): String = when (reply) {
    is sentinelrecovery.uniffi.Reply.Bulk -> String(reply.value)
    is sentinelrecovery.uniffi.Reply.Simple -> reply.value
    is sentinelrecovery.uniffi.Reply.Verbatim -> String(reply.value)
    else -> throw Failure("not a string reply: $reply")
}

