// The host layer's guarantees seen from .NET: close with many commands in flight; an event handler
// that disposes its own client; a panic inside the library. (Dispose racing with a kill -9 failover
// is FailoverTests.DisposeDuringRecoveryAndFollowAKilledPrimary.)
using System;
using System.Collections.Generic;
using System.Linq;
using System.Threading;
using System.Threading.Tasks;
using NUnit.Framework;

namespace SentinelRecovery.Tests
{
    [TestFixture]
    public class HostTests
    {
        [Test]
        public void DisposeWith2000CommandsInFlightCompletesEveryTaskWithClosedBeforeItReturns()
        {
            // A sentinel that refuses: every command waits for a primary until the client closes.
            var options = new Dictionary<string, string> { { "queue_size", "5000" }, { "command_timeout_ms", "60000" } };
            var c = SentinelClient.Open("redis+sentinel://127.0.0.1:1/mymaster", options);
            var tasks = Enumerable.Range(0, 2000).Select(_ => c.ExecuteAsync("GET", "k")).ToList();
            Assert.That(tasks.Any(t => t.IsCompleted), Is.False, "all wait for a primary");
            c.Dispose();
            // Completed by the time Dispose returned (their continuations may run later).
            Assert.That(tasks.All(t => t.IsCompleted), Is.True);
            foreach (var t in tasks)
            {
                Assert.That(t.IsFaulted, Is.True);
                Assert.That(t.Exception.InnerException, Is.InstanceOf<ClientClosedException>());
            }
            Assert.Throws<ClientClosedException>(() => c.ExecuteAsync("GET", "k").GetAwaiter().GetResult());
        }

        [Test]
        public void DisposeOnAnotherThreadWaitsForTheRunningHandlerAndNoneRunsAfter()
        {
            var options = new Dictionary<string, string> {
                { "sentinel_timeout_ms", "200" }, { "retry_base_ms", "20" }, { "retry_max_ms", "50" } };
            var c = SentinelClient.Open("redis+sentinel://127.0.0.1:1/mymaster", options);
            var entered = new ManualResetEventSlim();
            int finished = 0, afterDispose = 0, disposed = 0;
            c.DiscoveryFailed += (s, e) =>
            {
                if (Volatile.Read(ref disposed) != 0) Interlocked.Increment(ref afterDispose);
                Assert.That(Thread.CurrentThread.Name, Is.EqualTo("sr-dotnet-host"));
                entered.Set();
                Thread.Sleep(300);
                Interlocked.Exchange(ref finished, 1);
            };
            Assert.That(entered.Wait(20000), Is.True, "no discovery_failed event");
            c.Dispose(); // this thread, while the handler sleeps on the host thread
            Volatile.Write(ref disposed, 1);
            Assert.That(finished, Is.EqualTo(1), "Dispose returned while a handler was running");
            Thread.Sleep(300);
            Assert.That(afterDispose, Is.EqualTo(0));
        }

        [Test]
        public void AnEventHandlerMayDisposeItsOwnClientAndNoHandlerRunsAfter()
        {
            // A refusing sentinel with fast retries: a steady stream of discovery_failed events.
            var options = new Dictionary<string, string> {
                { "sentinel_timeout_ms", "200" }, { "retry_base_ms", "20" }, { "retry_max_ms", "50" } };
            var c = SentinelClient.Open("redis+sentinel://127.0.0.1:1/mymaster", options);
            int calls = 0, afterDispose = 0, disposedInside = 0;
            var disposeReturned = new ManualResetEventSlim();
            c.DiscoveryFailed += (s, e) =>
            {
                if (disposeReturned.IsSet) Interlocked.Increment(ref afterDispose);
                if (Interlocked.Increment(ref calls) != 1) return;
                c.Dispose(); // from inside its own handler: must return, not deadlock
                Interlocked.Exchange(ref disposedInside, 1);
                disposeReturned.Set();
            };
            Assert.That(disposeReturned.Wait(20000), Is.True, "Dispose inside a handler did not return");
            Assert.That(disposedInside, Is.EqualTo(1));
            Assert.Throws<ClientClosedException>(() => c.ExecuteAsync("GET", "k").GetAwaiter().GetResult());
            // Several retry periods: a handler still subscribed would have run again by now.
            Thread.Sleep(300);
            Assert.That(afterDispose, Is.EqualTo(0));
            Assert.That(calls, Is.EqualTo(1));
        }

        [Test]
        public void APanicInTheLibraryIsInternalExceptionOnceAndTheClientGoesOn()
        {
            var options = new Dictionary<string, string> { { "command_timeout_ms", "200" } };
            using (var c = SentinelClient.Open("redis+sentinel://127.0.0.1:1/mymaster", options))
            {
                var t = c.PanicForTestAsync();
                Assert.That(((IAsyncResult)t).AsyncWaitHandle.WaitOne(10000), Is.True, "the panic never completed");
                var e = Assert.Throws<InternalException>(() => t.GetAwaiter().GetResult());
                Assert.That(e.Code, Is.EqualTo(ErrorCode.Internal));
                StringAssert.Contains("a test panic", e.Message);
                // Still answering: with no primary to be found, with that error, not a panic.
                var again = Assert.Catch<SentinelRecoveryException>(() => c.ExecuteAsync("GET", "k").GetAwaiter().GetResult());
                Assert.That(again, Is.Not.InstanceOf<InternalException>());
            }
        }
    }
}
