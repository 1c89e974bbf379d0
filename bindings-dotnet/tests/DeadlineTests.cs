// Every call ends by its deadline, with several clients of one URL in the process (issue 10): a
// kill -9 of the primary under 16 concurrent ExecuteAsync writers on the first of 2 or 8 clients,
// the second sending a PING every 500 ms, the others idle. Every task must complete (reply or
// fault) within command_timeout_ms + a slack of when its command was issued; a task that
// completes later, or never, fails the test, and the failure lists those commands. The test waits
// on states (writes acknowledged, PrimaryChanged, writes on the new primary, nothing pending),
// each bounded; no fixed sleep decides an outcome.
using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Globalization;
using System.Linq;
using System.Threading;
using System.Threading.Tasks;
using NUnit.Framework;

namespace SentinelRecovery.Tests
{
    [TestFixture]
    public class DeadlineTests
    {
        /// <summary>command_timeout_ms of every client.</summary>
        private const int DeadlineMs = 3000;
        /// <summary>What a completion may take beyond its deadline (a busy 2-core machine).</summary>
        private const int SlackMs = 2000;
        private const int Writers = 16;
        private const int FailoverMs = 40000;
        private static readonly string[] Allowed = { "timeout", "connection_lost" };

        private sealed class Op
        {
            internal string What;
            internal long Id;
            internal double Start;
            internal double End = -1;
            internal string Outcome;
        }

        /// <summary>Every command issued: when, and when and how its task completed.</summary>
        private sealed class Ledger
        {
            private readonly Stopwatch _clock = Stopwatch.StartNew();
            private readonly object _lock = new object();
            private readonly List<Op> _ops = new List<Op>();
            private readonly List<string> _wrong = new List<string>();
            private readonly Dictionary<string, int> _errors = new Dictionary<string, int>();
            private long _acked;

            internal double Now { get { return _clock.Elapsed.TotalMilliseconds; } }
            internal long Acked { get { return Interlocked.Read(ref _acked); } }

            /// <summary>Issues one command through <paramref name="call"/> and records its
            /// completion; true if it succeeded.</summary>
            internal async Task<bool> Run(string what, Func<Task<RedisReply>> call)
            {
                var op = new Op { What = what };
                lock (_lock)
                {
                    op.Id = _ops.Count;
                    op.Start = Now;
                    _ops.Add(op);
                }
                try
                {
                    await call().ConfigureAwait(false);
                }
                catch (Exception e)
                {
                    Settle(op, e);
                    return false;
                }
                Settle(op, null);
                return true;
            }

            private void Settle(Op op, Exception e)
            {
                double end = Now;
                lock (_lock)
                {
                    if (op.End >= 0)
                    {
                        _wrong.Add(op.What + " #" + op.Id + " completed twice");
                        return;
                    }
                    op.End = end;
                    if (e == null)
                    {
                        op.Outcome = "ok";
                        _acked++;
                        return;
                    }
                    var sre = e as SentinelRecoveryException;
                    op.Outcome = sre != null ? sre.CodeName : e.GetType().Name;
                    int n;
                    _errors.TryGetValue(op.Outcome, out n);
                    _errors[op.Outcome] = n + 1;
                    if (Array.IndexOf(Allowed, op.Outcome) < 0)
                        _wrong.Add(op.What + " #" + op.Id + ": unexpected " + op.Outcome + ": " + e.Message);
                }
            }

            internal int Issued { get { lock (_lock) return _ops.Count; } }
            internal int Pending { get { lock (_lock) return _ops.Count(o => o.End < 0); } }
            internal double LastStart { get { lock (_lock) return _ops.Count == 0 ? Now : _ops.Max(o => o.Start); } }
            internal List<string> Wrong { get { lock (_lock) return new List<string>(_wrong); } }

            internal string Errors
            {
                get
                {
                    lock (_lock)
                        return "{" + string.Join(", ", _errors.Select(kv => kv.Key + ": " + kv.Value)) + "}";
                }
            }

            /// <summary>Commands issued by <paramref name="at"/> and not completed before it.</summary>
            internal int InFlightAt(double at)
            {
                lock (_lock) return _ops.Count(o => o.Start <= at && (o.End < 0 || o.End >= at));
            }

            /// <summary>Commands not completed within deadline + slack of their start.</summary>
            internal List<string> Late()
            {
                double now = Now;
                lock (_lock)
                {
                    return _ops.Where(o => (o.End < 0 ? now : o.End) - o.Start > DeadlineMs + SlackMs)
                        .Select(o => string.Format(CultureInfo.InvariantCulture, "{0} #{1} {2} after {3:F0} ms",
                            o.What, o.Id, o.End < 0 ? "still pending" : "completed late (" + o.Outcome + ")",
                            (o.End < 0 ? now : o.End) - o.Start))
                        .ToList();
                }
            }

            internal bool AnyLate()
            {
                double now = Now;
                lock (_lock) return _ops.Any(o => (o.End < 0 ? now : o.End) - o.Start > DeadlineMs + SlackMs);
            }
        }

        [Test]
        public void KillUnderWritersOnTheFirstOfTwoClientsEveryTaskCompletesByItsDeadline()
        {
            KillUnderWriters(2);
        }

        [Test]
        public void KillUnderWritersOnTheFirstOfEightClientsEveryTaskCompletesByItsDeadline()
        {
            KillUnderWriters(8);
        }

        private static void KillUnderWriters(int clientCount)
        {
            using (var topo = new TopologyProcess())
            {
                var clients = new List<SentinelClient>();
                var tasks = new List<Task>();
                var stop = new CancellationTokenSource();
                bool disposedInTime;
                try
                {
                    var options = new Dictionary<string, string>
                    {
                        { "command_timeout_ms", DeadlineMs.ToString(CultureInfo.InvariantCulture) },
                    };
                    for (int i = 0; i < clientCount; i++)
                        clients.Add(Wait.Within(SentinelClient.ConnectAsync(topo.Url, options), 15000, "ConnectAsync")
                            .GetAwaiter().GetResult());
                    var first = clients[0];
                    var second = clients[1];
                    var ledger = new Ledger();
                    int oldPort = topo.PrimaryPort;
                    var switched = new ManualResetEventSlim();
                    first.PrimaryChanged += (s, e) =>
                    {
                        if (e.OldPrimary != null && e.OldPrimary.Port == oldPort) switched.Set();
                    };

                    for (int n = 0; n < Writers; n++)
                    {
                        var what = "INCR#" + n;
                        tasks.Add(Task.Run(async () =>
                        {
                            while (!stop.IsCancellationRequested)
                            {
                                if (!await ledger.Run(what, () => first.ExecuteAsync("INCR", "dotnet:deadlines")).ConfigureAwait(false))
                                    await Task.Delay(10).ConfigureAwait(false); // a brief back-off, as applications do
                            }
                        }));
                    }
                    // The second client sends a PING every 500 ms; the others stay idle.
                    tasks.Add(Task.Run(async () =>
                    {
                        while (!stop.IsCancellationRequested)
                        {
                            await ledger.Run("PING", () => second.ExecuteAsync("PING")).ConfigureAwait(false);
                            await Task.Delay(500).ConfigureAwait(false);
                        }
                    }));

                    Wait.Until(() => ledger.Acked > 200, 15000, "writes before the kill");
                    double killSentAt = ledger.Now;
                    topo.Command("kill9 " + oldPort);
                    int inFlight = ledger.InFlightAt(killSentAt);
                    Assert.That(switched.Wait(FailoverMs), Is.True, "no PrimaryChanged away from the killed primary");
                    long ackedAtSwitch = ledger.Acked;
                    // Writes succeed again, or a command is already late (then the check says which).
                    Wait.Until(() => ledger.Acked > ackedAtSwitch + 100 || ledger.AnyLate(), FailoverMs, "writes after the switch");
                    stop.Cancel();
                    // Wait for the state "nothing pending", bounded by the last deadline plus the slack.
                    double settleBy = ledger.LastStart + DeadlineMs + SlackMs;
                    Wait.Until(() => ledger.Pending == 0 || ledger.Now > settleBy, DeadlineMs + SlackMs + 5000,
                        "every task completed or past its deadline");

                    var late = ledger.Late();
                    Console.WriteLine("{0} clients: {1} commands ({2} ok, errors {3}), {4} in flight at the kill, {5} late or missing",
                        clientCount, ledger.Issued, ledger.Acked, ledger.Errors, inFlight, late.Count);
                    Assert.That(late, Is.Empty, string.Format(CultureInfo.InvariantCulture,
                        "{0} clients, {1} commands in flight at the kill: {2} not completed within {3} ms + {4} ms of issue (first 20): {5}",
                        clientCount, inFlight, late.Count, DeadlineMs, SlackMs, string.Join("; ", late.Take(20))));
                    var wrong = ledger.Wrong;
                    Assert.That(wrong, Is.Empty, string.Join("; ", wrong.Take(20)));
                    Assert.That(inFlight, Is.GreaterThan(0), "no command was in flight when the kill was sent (the test shows nothing)");
                    Assert.That(ledger.Acked, Is.GreaterThan(ackedAtSwitch), "no write succeeded after the switch");
                }
                finally
                {
                    stop.Cancel();
                    // The loops end once their last command completes (each by its deadline, checked
                    // above); one whose task never completes is left behind, not waited for.
                    ((IAsyncResult)Task.WhenAll(tasks)).AsyncWaitHandle.WaitOne(DeadlineMs + SlackMs);
                    // Dispose waits for the client's completions: bounded, so a lost one fails the
                    // test below instead of hanging the suite.
                    var disposing = Task.Run(() => { foreach (var c in clients) c.Dispose(); });
                    disposedInTime = ((IAsyncResult)disposing).AsyncWaitHandle.WaitOne(10000);
                }
                Assert.That(disposedInTime, Is.True, "disposing the clients did not return within 10 s");
            }
        }
    }
}
