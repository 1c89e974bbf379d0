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


/** An error reply (`-CODE message`) read from a plain RESP connection. */
data class RespError(val message: String)

/**
 * A plain RESP2 connection over a [java.net.Socket], as a client that knows nothing of Sentinel
 * speaks to a proxy or a node: commands written as arrays of bulk strings, replies read as
 * String (simple and bulk), Long, null, List or [RespError]. Every read gives up after
 * [timeoutMs], so a test waiting on a reply fails instead of hanging.
 */
class RespConnection(host: String, port: Int, timeoutMs: Int = 30_000) : AutoCloseable {
    private val socket = java.net.Socket().apply {
        connect(java.net.InetSocketAddress(host, port), timeoutMs)
        soTimeout = timeoutMs
        tcpNoDelay = true
    }
    private val input = java.io.BufferedInputStream(socket.getInputStream())
    private val output = socket.getOutputStream()

    /** Writes one command without reading its reply (pipelining). */
    fun send(vararg args: String) {
        val out = java.io.ByteArrayOutputStream()
        out.write("*${args.size}\r\n".toByteArray())
        for (arg in args) {
            val bytes = arg.toByteArray()
            out.write("\$${bytes.size}\r\n".toByteArray())
            out.write(bytes)
            out.write("\r\n".toByteArray())
        }
        output.write(out.toByteArray())
        output.flush()
    }

    /** Writes raw bytes (inline commands, malformed input). */
    fun sendRaw(bytes: String) {
        output.write(bytes.toByteArray())
        output.flush()
    }

    /** Sends one command and reads its reply. */
    fun call(vararg args: String): Any? {
        send(*args)
        return read()
    }

    /** Reads one reply; [java.io.EOFException] when the peer closed the connection. */
    fun read(): Any? {
        val line = line()
        val rest = line.substring(1)
        return when (line[0]) {
            '+' -> rest
            '-' -> RespError(rest)
            ':' -> rest.toLong()
            '$' -> rest.toInt().let { n -> if (n < 0) null else String(exactly(n + 2), 0, n) }
            '*' -> rest.toInt().let { n -> if (n < 0) null else List(n) { read() } }
            else -> throw Failure("not a RESP2 reply: $line")
        }
    }

    /** Whether the peer closed the connection (end of stream or reset) within the read timeout. */
    fun closedByPeer(): Boolean = try {
        input.read() == -1
    } catch (e: java.net.SocketTimeoutException) {
        false
    } catch (e: java.io.IOException) {
        true
    }

    private fun line(): String {
        val out = java.io.ByteArrayOutputStream()
        while (true) {
            val b = input.read()
            if (b < 0) throw java.io.EOFException("the connection was closed")
            if (b == '\n'.code && out.size() > 0 && out.toByteArray().last() == '\r'.code.toByte()) {
                return String(out.toByteArray(), 0, out.size() - 1)
            }
            out.write(b)
        }
    }

    private fun exactly(n: Int): ByteArray {
        val bytes = ByteArray(n)
        var got = 0
        while (got < n) {
            val read = input.read(bytes, got, n - got)
            if (read < 0) throw java.io.EOFException("the connection was closed")
            got += read
        }
        return bytes
    }

    override fun close() = socket.close()
}
