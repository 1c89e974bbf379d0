// The JVM binding from plain Java: CompletableFuture variants, a Consumer listener run off the
// core's threads, try-with-resources, errors by code.
package sentinelrecovery;

import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import sentinelrecovery.uniffi.Event;
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
        }
    }
}
