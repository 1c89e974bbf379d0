// The host layer's guarantees seen from .NET: close with many commands in flight.
using System;
using System.Collections.Generic;
using System.Linq;
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
    }
}
