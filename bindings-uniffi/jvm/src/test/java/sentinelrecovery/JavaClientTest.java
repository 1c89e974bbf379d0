// The JVM binding from plain Java: CompletableFuture variants, a Consumer listener run off the
// core's threads, try-with-resources, errors by code; the proxy with try-with-resources and
// plain RESP over a java.net.Socket.
package sentinelrecovery;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import sentinelrecovery.uniffi.Event;
import sentinelrecovery.uniffi.ProxyStats;
import sentinelrecovery.uniffi.Reply;
import sentinelrecovery.uniffi.SentinelException;

public final class JavaClientTest {
    private static void check(boolean condition, String what) {
        if (!condition) throw new AssertionError(what);
    }

    private static void waitFor(long seconds, String what, java.util.function.BooleanSupplier done)
            throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
        while (!done.getAsBoolean()) {
            if (System.nanoTime() > deadline) throw new AssertionError("timed out waiting for " + what);
            Thread.sleep(20);
        }
    }

    /** Writes `request` and reads until `expected` came (or fails: the socket's read timeout). */
    private static void exchange(Socket socket, String request, String expected) throws IOException {
        OutputStream out = socket.getOutputStream();
        out.write(request.getBytes(StandardCharsets.UTF_8));
        out.flush();
        InputStream in = socket.getInputStream();
        byte[] got = new byte[expected.length()];
        int n = 0;
        while (n < got.length) {
            int read = in.read(got, n, got.length - n);
            if (read < 0) throw new AssertionError("connection closed after " + n + " bytes");
            n += read;
        }
        String reply = new String(got, StandardCharsets.UTF_8);
        check(reply.equals(expected), request.trim() + " replied " + reply.trim());
    }

    private static void proxy(TestTopology topology) throws Exception {
        SentinelProxy kept;
        try (SentinelProxy proxy = SentinelProxy.start(topology.getUrl(), Map.of("hold_ms", "20000"))) {
            kept = proxy;
            check(proxy.getAddress().equals("127.0.0.1:" + proxy.getPort()), "address " + proxy.getAddress());
            try (Socket socket = new Socket(proxy.getHost(), proxy.getPort())) {
                socket.setSoTimeout(30_000);
                exchange(socket, "*1\r\n$4\r\nPING\r\n", "+PONG\r\n");
                exchange(socket, "*3\r\n$3\r\nSET\r\n$7\r\njava:px\r\n$2\r\nv1\r\n", "+OK\r\n");
                exchange(socket, "*2\r\n$3\r\nGET\r\n$7\r\njava:px\r\n", "$2\r\nv1\r\n");
                ProxyStats stats = proxy.stats();
                check(stats.getSessionsOpen() == 1, "sessions open: " + stats);
                check(stats.getCommandsForwarded() >= 3, "commands forwarded: " + stats);
            }
        }
        check(kept.isClosed(), "try-with-resources closed the proxy");
        try {
            kept.stats();
            throw new AssertionError("stats after close succeeded");
        } catch (SentinelException.Closed e) {
            check(TablesKt.getErrorCode(e).equals("closed"), "code");
        }
        try {
            SentinelProxy.start(topology.getUrl(), Map.of("max_clients", "many")).close();
            throw new AssertionError("a bad option was accepted");
        } catch (SentinelException.Config e) {
            check(e.getMessage().contains("max_clients"), "the message names the key: " + e.getMessage());
        }
    }

    public static void main(String[] args) throws Exception {
        try (TestTopology topology = new TestTopology()) {
            try (SentinelClient client = SentinelClient.connect(topology.getUrl(), Map.of("command_timeout_ms", "5000"))) {
                client.readyAsync().get(10, TimeUnit.SECONDS);

                Reply set = client.executeAsync("SET", "java:k", "v").get(10, TimeUnit.SECONDS);
                check(set.equals(new Reply.Simple("OK")), "SET replied " + set);
                Reply got = client.executeAsync("GET", "java:k").get(10, TimeUnit.SECONDS);
                check(new String(((Reply.Bulk) got).getValue()).equals("v"), "GET replied " + got);

                try {
                    client.executeAsync("NOSUCHCOMMAND").get(10, TimeUnit.SECONDS);
                    throw new AssertionError("an unknown command succeeded");
                } catch (ExecutionException e) {
                    check(e.getCause() instanceof SentinelException.Server, "cause " + e.getCause());
                    check(TablesKt.getErrorCode((SentinelException) e.getCause()).equals("server"), "code");
                }

                List<Event> events = new CopyOnWriteArrayList<>();
                List<String> threads = new CopyOnWriteArrayList<>();
                try (AutoCloseable listener = client.onEvent(e -> {
                    threads.add(Thread.currentThread().getName());
                    events.add(e);
                })) {
                    topology.cmd("add-sentinel", 60);
                    client.refresh();
                    waitFor(20, "sentinels_changed", () -> events.stream().anyMatch(e -> e.getKind().equals("sentinels_changed")));
                }
                check(threads.stream().noneMatch(n -> n.startsWith("sr-worker")), "listener ran on a core thread: " + threads);
            }
            System.out.println("ok   java: futures, listener, errors by code");
            proxy(topology);
            System.out.println("ok   java: proxy with try-with-resources, plain RESP over a Socket");
        }
    }
}
