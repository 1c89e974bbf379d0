// The shared deadline cases (tests/cases/deadlines.tsv, which every binding's suite reads; its
// header describes the columns): ExecuteAsync(TimeSpan, ...) for a per-call timeout,
// ExecuteAsync(...) under the client's command_timeout_ms, PipelineAsync (its timeout is the
// whole pipeline's), TransactionAsync (its timeout is the whole transaction's, until EXEC's reply),
// SubscribeAsync under the client's command_timeout_ms, SentinelDoctor.RunAsync with
// connect_timeout_ms (its report's status), and a CancellationToken for the cancel cases. Each
// call ends by its deadline with the expected
// outcome, and afterwards no client is left blocked on the server (INFO clients:
// blocked_clients back to what it was), i.e. a timed-out blocking command's connection was
// closed. "paused" cases stop the current primary on a topology whose down-after (60 s) is far
// longer than the case, "failover" cases stall a failover (sr-topology's stall-failover); both
// undo it afterwards and check that the same client works again.
using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Globalization;
using System.IO;
using System.Linq;
using System.Threading;
using System.Threading.Tasks;
using NUnit.Framework;

namespace SentinelRecovery.Tests
{
    [TestFixture]
    public class DeadlineCasesTests
    {
        /// <summary>What a call may take beyond its deadline (a busy 2-core machine).</summary>
        private const int SlackMs = 1000;
        /// <summary>The client default of a per-call or cancel case: long, so only the call's own timeout (or the cancel) can end it.</summary>
        private const int LongDefaultMs = 30000;
        /// <summary>The client of a "no-primary" case: its only sentinel is a loopback port nobody listens on.</summary>
        private const string NoPrimaryUrl = "redis+sentinel://127.0.0.1:1/mymaster";

        public sealed class Case
        {
            public string Name;
            public string Kind;
            public string Deadline;
            public bool Paused;
            public bool NoPrimary;
            public bool Failover;
            public int TimeoutMs;
            public int BlockMs;
            public string Expect;
            public string[][] Commands;
            /// <summary>A doctor's steps each wait for at most a connect and one reply: 3 x its timeout.</summary>
            public int BudgetMs
            {
                get
                {
                    if (Kind == "doctor" && Deadline == "default") return 3 * TimeoutMs + SlackMs;
                    return TimeoutMs + (Deadline == "default" ? BlockMs : 0) + SlackMs;
                }
            }
            public override string ToString() { return Name; }
        }

        public static IEnumerable<Case> Cases()
        {
            var cases = new List<Case>();
            foreach (var f in SharedCases.Rows("SR_CASES_FILE", 8, 18))
            {
                if (!new[] { "command", "pipeline", "transaction", "subscribe", "doctor" }.Contains(f[1])) throw new FormatException(f[0] + ": kind " + f[1]);
                if (!new[] { "per-call", "default", "cancel" }.Contains(f[2])) throw new FormatException(f[0] + ": deadline " + f[2]);
                if (!new[] { "healthy", "paused", "failover", "no-primary" }.Contains(f[3])) throw new FormatException(f[0] + ": state " + f[3]);
                if (!new[] { "timeout", "nil", "config", "cancelled", "failure" }.Contains(f[6])) throw new FormatException(f[0] + ": expect " + f[6]);
                cases.Add(new Case
                {
                    Name = f[0],
                    Kind = f[1],
                    Deadline = f[2],
                    Paused = f[3] == "paused",
                    Failover = f[3] == "failover",
                    NoPrimary = f[3] == "no-primary",
                    TimeoutMs = int.Parse(f[4], CultureInfo.InvariantCulture),
                    BlockMs = int.Parse(f[5], CultureInfo.InvariantCulture),
                    Expect = f[6],
                    Commands = f[7].Split(new[] { " ; " }, StringSplitOptions.None).Select(c => c.Split(' ')).ToArray(),
                });
            }
            return cases;
        }

        private TopologyProcess _topo;
        private SentinelClient _observer;
        private int _serial;

        [TestFixtureSetUp]
        public void Up()
        {
            // A down-after far longer than any case: a paused primary stays the primary (no failover);
            // a failover-timeout as long: a stalled failover is not aborted while a case runs.
            _topo = new TopologyProcess("--replicas", "1", "--down-after", "60000", "--failover-timeout", "60000");
            _observer = Connect(_topo.Url, 5000);
        }

        [TestFixtureTearDown]
        public void Down()
        {
            if (_observer != null) _observer.Dispose();
            _topo.Dispose();
        }

        /// <summary>The <c>port</c> of an sr-topology answer.</summary>
        private static string Port(Dictionary<string, object> answer)
        {
            return ((int)(double)answer["port"]).ToString(CultureInfo.InvariantCulture);
        }

        private static SentinelClient Connect(string url, int defaultMs)
        {
            var options = new Dictionary<string, string> { { "command_timeout_ms", defaultMs.ToString(CultureInfo.InvariantCulture) } };
            return Wait.Within(SentinelClient.ConnectAsync(url, options), 30000, "connect").GetAwaiter().GetResult();
        }

        /// <summary>The case's client; a no-primary one is opened without waiting (connecting would fail, as none is found).</summary>
        private SentinelClient Client(Case c)
        {
            // A doctor case's deadline is the doctor's connect_timeout_ms, not this client's.
            var defaultMs = c.Deadline == "default" && c.Kind != "doctor" ? c.TimeoutMs : LongDefaultMs;
            if (!c.NoPrimary) return Connect(_topo.Url, defaultMs);
            var options = new Dictionary<string, string> { { "command_timeout_ms", defaultMs.ToString(CultureInfo.InvariantCulture) } };
            return SentinelClient.Open(NoPrimaryUrl, options);
        }

        private long BlockedClients()
        {
            var info = _observer.Execute("INFO", "clients").AsString();
            var line = info.Split('\n').FirstOrDefault(l => l.StartsWith("blocked_clients:", StringComparison.Ordinal));
            Assert.IsNotNull(line, "no blocked_clients in INFO clients: " + info);
            return long.Parse(line.Substring("blocked_clients:".Length).Trim(), CultureInfo.InvariantCulture);
        }

        /// <summary>The doctor's options of a doctor case's <c>command</c>: "-" or "watch=SECONDS".</summary>
        private static DoctorOptions DoctorOptionsOf(Case c)
        {
            var spec = string.Join(" ", c.Commands[0]);
            if (spec == "-") return null;
            if (!spec.StartsWith("watch=", StringComparison.Ordinal)) throw new FormatException(c.Name + ": doctor options " + spec);
            return new DoctorOptions { Watch = TimeSpan.FromSeconds(double.Parse(spec.Substring("watch=".Length), CultureInfo.InvariantCulture)) };
        }

        /// <summary>The case's call: a reply, null for a pipeline, transaction or subscription
        /// (closed at once), or a doctor's report.</summary>
        private async Task<object> Call(SentinelClient client, Case c, object[][] commands, CancellationToken token)
        {
            TimeSpan? own = c.Deadline == "per-call" ? TimeSpan.FromMilliseconds(c.TimeoutMs) : (TimeSpan?)null;
            switch (c.Kind)
            {
                case "command":
                    if (own.HasValue) return await client.ExecuteAsync(own.Value, token, commands[0]).ConfigureAwait(false);
                    return await client.ExecuteAsync(token, commands[0]).ConfigureAwait(false);
                case "pipeline":
                    await client.PipelineAsync(commands, own, token).ConfigureAwait(false);
                    return null;
                case "transaction":
                    await client.TransactionAsync(commands, null, own, token).ConfigureAwait(false);
                    return null;
                case "subscribe":
                    // Its deadline is the client's command_timeout_ms; made anyway, it is closed.
                    using (await client.SubscribeAsync(commands[0].Skip(1).Select(a => (string)a), null, 0, token).ConfigureAwait(false)) { }
                    return null;
                default:
                    var options = new Dictionary<string, string> { { "connect_timeout_ms", c.TimeoutMs.ToString(CultureInfo.InvariantCulture) } };
                    return await SentinelDoctor.RunAsync(c.NoPrimary ? NoPrimaryUrl : _topo.Url, options, DoctorOptionsOf(c), token).ConfigureAwait(false);
            }
        }

        [Test, TestCaseSource("Cases")]
        public void EndsByItsDeadlineAndLeavesNothingBlocked(Case c)
        {
            using (var client = Client(c))
            using (var cancel = new CancellationTokenSource())
            {
                var before = BlockedClients();
                var key = "deadline-case:" + c.Name + ":" + (_serial++).ToString(CultureInfo.InvariantCulture);
                var commands = c.Commands.Select(cmd => cmd.Select(a => (object)a.Replace("{key}", key)).ToArray()).ToArray();
                // The fault's undoing while it is in place: "cont PORT" or "release-failover PORT".
                string undo = null;
                try
                {
                    if (c.Paused)
                    {
                        var port = Port(_topo.Command("primary"));
                        _topo.Command("stop " + port);
                        undo = "cont " + port;
                    }
                    else if (c.Failover)
                    {
                        undo = "release-failover " + Port(_topo.Command("stall-failover")) + " 30000";
                    }
                    var clock = Stopwatch.StartNew();
                    var task = Call(client, c, commands, cancel.Token);
                    if (c.Deadline == "cancel") cancel.CancelAfter(c.TimeoutMs);
                    Exception error = null;
                    object reply = null;
                    try { reply = Wait.Within(task, c.BudgetMs + 5000, c.Name).GetAwaiter().GetResult(); }
                    catch (Exception e) { error = e; }
                    var took = clock.ElapsedMilliseconds;
                    Console.WriteLine("{0}: ended after {1} ms (allowed {2} ms)", c.Name, took, c.BudgetMs);
                    if (undo != null)
                    {
                        var line = undo;
                        undo = null;
                        _topo.Command(line);
                    }
                    Assert.LessOrEqual(took, c.BudgetMs, c.Name + ": ended after " + took + " ms");
                    var got = error == null ? "a reply" : error.ToString();
                    switch (c.Expect)
                    {
                        case "timeout": Assert.IsInstanceOf<SentinelTimeoutException>(error, c.Name + ": expected a timeout, got " + got); break;
                        case "config": Assert.IsInstanceOf<ConfigException>(error, c.Name + ": expected a ConfigException, got " + got); break;
                        case "cancelled": Assert.IsInstanceOf<OperationCanceledException>(error, c.Name + ": expected a cancellation, got " + got); break;
                        case "failure":
                            Assert.IsNull(error, c.Name + ": " + error);
                            var report = (DoctorReport)reply;
                            Assert.AreEqual(DoctorStatus.Failure, report.Status, c.Name + ": " + report.Json);
                            break;
                        default:
                            Assert.IsNull(error, c.Name + ": " + error);
                            Assert.IsTrue(((RedisReply)reply).IsNull, c.Name + ": expected a nil reply");
                            break;
                    }
                    if (c.Paused || c.Failover)
                        Assert.AreEqual("PONG", Wait.Within(client.ExecuteAsync(TimeSpan.FromSeconds(10), "PING"), 15000, c.Name + ": PING after the fault").GetAwaiter().GetResult().AsString());
                    Wait.Until(() => BlockedClients() <= before, 5000, c.Name + ": the server still blocks a client");
                }
                finally
                {
                    if (undo != null) _topo.Command(undo);
                }
            }
        }
    }
}
