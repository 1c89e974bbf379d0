// Test support: a real topology run by the testkit's `sr-topology`, a tiny JSON reader, and
// deadline helpers (wait on states with deadlines; never sleep-then-assert).
using System;
using System.Collections.Concurrent;
using System.Collections.Generic;
using System.Diagnostics;
using System.Globalization;
using System.IO;
using System.Text;
using System.Threading;
using System.Threading.Tasks;
using NUnit.Framework;

namespace SentinelRecovery.Tests
{
    /// <summary>`sr-topology up --json`: primary + replicas + sentinels on loopback. Commands are
    /// stdin lines answered by one JSON line each; Dispose sends `down` and waits for the exit
    /// (EOF on its stdin also stops it, so a crashed test run leaves no servers behind).</summary>
    public sealed class TopologyProcess : IDisposable
    {
        private readonly Process _p;
        private readonly BlockingCollection<string> _lines = new BlockingCollection<string>();

        public string Url { get; private set; }
        public string Service { get; private set; }
        public int PrimaryPort { get; private set; }
        public List<int> SentinelPorts { get; private set; }
        public List<int> ReplicaPorts { get; private set; }

        public static string Binary
        {
            get
            {
                var b = Environment.GetEnvironmentVariable("SR_TOPOLOGY_BIN");
                if (!string.IsNullOrEmpty(b)) return b;
                var target = Environment.GetEnvironmentVariable("CARGO_TARGET_DIR");
                if (string.IsNullOrEmpty(target)) // the tests are built into <target>/dotnet
                    target = Path.GetDirectoryName(Path.GetDirectoryName(typeof(TopologyProcess).Assembly.Location));
                return Path.Combine(target, "debug", "sr-topology");
            }
        }

        public TopologyProcess(params string[] args)
        {
            var psi = new ProcessStartInfo(Binary, "up --json " + string.Join(" ", args))
            {
                UseShellExecute = false,
                RedirectStandardInput = true,
                RedirectStandardOutput = true,
            };
            _p = Process.Start(psi);
            var reader = new Thread(() =>
            {
                try
                {
                    string l;
                    while ((l = _p.StandardOutput.ReadLine()) != null) _lines.Add(l);
                }
                catch { }
                _lines.CompleteAdding();
            }) { IsBackground = true, Name = "sr-topology-reader" };
            reader.Start();
            var first = Next(60000);
            var j = (Dictionary<string, object>)Json.Parse(first);
            Url = (string)j["url"];
            Service = (string)j["service"];
            PrimaryPort = Port(j["primary"]);
            SentinelPorts = new List<int>();
            foreach (var s in (List<object>)j["sentinels"]) SentinelPorts.Add(Port(s));
            ReplicaPorts = new List<int>();
            foreach (var s in (List<object>)j["replicas"]) ReplicaPorts.Add(Port(s));
        }

        private static int Port(object node) { return (int)(double)((Dictionary<string, object>)node)["port"]; }

        private string Next(int timeoutMs)
        {
            string l;
            if (!_lines.TryTake(out l, timeoutMs))
                throw new TimeoutException("sr-topology did not answer within " + timeoutMs + " ms");
            if (l == null) throw new IOException("sr-topology exited");
            return l;
        }

        /// <summary>Sends one command; returns its JSON answer, throws if it says ok:false.</summary>
        public Dictionary<string, object> Command(string line, int timeoutMs = 60000)
        {
            _p.StandardInput.WriteLine(line);
            _p.StandardInput.Flush();
            var j = (Dictionary<string, object>)Json.Parse(Next(timeoutMs));
            if (!(bool)j["ok"]) throw new InvalidOperationException("sr-topology `" + line + "`: " + j["error"]);
            return j;
        }

        /// <summary>Port of the primary the sentinels report now.</summary>
        public int ReportedPrimary() { return (int)(double)Command("primary")["port"]; }

        public void Dispose()
        {
            try
            {
                _p.StandardInput.WriteLine("down");
                _p.StandardInput.Close();
            }
            catch { }
            if (!_p.WaitForExit(20000))
            {
                try { _p.Kill(); } catch { } // our own child, by its handle
                _p.WaitForExit(5000);
            }
            _p.Dispose();
        }
    }

    public static class Wait
    {
        /// <summary>Polls <paramref name="cond"/> until true or the deadline (then fails the test).</summary>
        public static void Until(Func<bool> cond, int timeoutMs, string what)
        {
            var sw = Stopwatch.StartNew();
            while (true)
            {
                try { if (cond()) return; } catch (SentinelRecoveryException) { }
                if (sw.ElapsedMilliseconds > timeoutMs) Assert.Fail("timed out after " + timeoutMs + " ms waiting for " + what);
                Thread.Sleep(20);
            }
        }

        /// <summary>The task, or a test failure if it is not complete within the deadline (a hang).</summary>
        public static async Task<T> Within<T>(Task<T> task, int timeoutMs, string what)
        {
            if (await Task.WhenAny(task, Task.Delay(timeoutMs)).ConfigureAwait(false) != task)
                Assert.Fail(what + " did not complete within " + timeoutMs + " ms");
            return await task.ConfigureAwait(false);
        }

        /// <summary>Waits for the task to complete in any way (fails the test on a hang); returns its exception or null.</summary>
        public static Exception Settles(Task task, int timeoutMs, string what)
        {
            if (!((IAsyncResult)task).AsyncWaitHandle.WaitOne(timeoutMs))
                Assert.Fail(what + " did not complete within " + timeoutMs + " ms");
            if (task.IsCanceled) return new TaskCanceledException(task);
            return task.Exception == null ? null : task.Exception.InnerException;
        }

        /// <summary>The exception a task fails with (fails the test if it succeeds or hangs).</summary>
        public static Exception Fails(Task task, int timeoutMs, string what)
        {
            var e = Settles(task, timeoutMs, what);
            if (e == null) Assert.Fail(what + " succeeded, expected a failure");
            return e;
        }
    }

    /// <summary>The shared cases files (tests/cases/, which every binding's suite reads).</summary>
    public static class SharedCases
    {
        /// <summary>The rows of the file named by <paramref name="envVar"/> (scripts/test.sh sets it):
        /// its lines that are neither blank nor comments, split at tabs, each with
        /// <paramref name="fields"/> fields, and at least <paramref name="atLeast"/> of them.</summary>
        public static List<string[]> Rows(string envVar, int fields, int atLeast)
        {
            var path = Environment.GetEnvironmentVariable(envVar);
            if (string.IsNullOrEmpty(path)) throw new InvalidOperationException(envVar + " is not set (scripts/test.sh sets it)");
            var rows = new List<string[]>();
            foreach (var line in File.ReadAllLines(path))
            {
                if (line.Trim().Length == 0 || line.StartsWith("#", StringComparison.Ordinal)) continue;
                var row = line.Split('\t');
                if (row.Length != fields) throw new FormatException(path + ": " + fields + " tab-separated fields in " + line);
                rows.Add(row);
            }
            if (rows.Count < atLeast) throw new FormatException(path + ": " + rows.Count + " cases");
            return rows;
        }
    }

    /// <summary>Just enough JSON for sr-topology's answers.</summary>
    public static class Json
    {
        public static object Parse(string s)
        {
            int i = 0;
            var v = Value(s, ref i);
            return v;
        }

        private static void Ws(string s, ref int i) { while (i < s.Length && char.IsWhiteSpace(s[i])) i++; }

        private static object Value(string s, ref int i)
        {
            Ws(s, ref i);
            char c = s[i];
            if (c == '{')
            {
                var d = new Dictionary<string, object>();
                i++;
                Ws(s, ref i);
                if (s[i] == '}') { i++; return d; }
                while (true)
                {
                    Ws(s, ref i);
                    var k = (string)Value(s, ref i);
                    Ws(s, ref i);
                    i++; // :
                    d[k] = Value(s, ref i);
                    Ws(s, ref i);
                    if (s[i++] == '}') return d;
                }
            }
            if (c == '[')
            {
                var l = new List<object>();
                i++;
                Ws(s, ref i);
                if (s[i] == ']') { i++; return l; }
                while (true)
                {
                    l.Add(Value(s, ref i));
                    Ws(s, ref i);
                    if (s[i++] == ']') return l;
                }
            }
            if (c == '"')
            {
                var b = new StringBuilder();
                i++;
                while (s[i] != '"')
                {
                    if (s[i] == '\\')
                    {
                        i++;
                        char e = s[i];
                        if (e == 'n') b.Append('\n');
                        else if (e == 't') b.Append('\t');
                        else if (e == 'u') { b.Append((char)int.Parse(s.Substring(i + 1, 4), NumberStyles.HexNumber)); i += 4; }
                        else b.Append(e);
                        i++;
                    }
                    else b.Append(s[i++]);
                }
                i++;
                return b.ToString();
            }
            if (s.Substring(i).StartsWith("true")) { i += 4; return true; }
            if (s.Substring(i).StartsWith("false")) { i += 5; return false; }
            if (s.Substring(i).StartsWith("null")) { i += 4; return null; }
            int st = i;
            while (i < s.Length && "+-0123456789.eE".IndexOf(s[i]) >= 0) i++;
            return double.Parse(s.Substring(st, i - st), CultureInfo.InvariantCulture);
        }
    }
}
