// The thread-pool probe of the original incident (DESIGN.md "Why it exists", 1).
//
// A dedicated thread queues one work item to the .NET thread pool every 50 ms (default minimum
// threads) and records how long each waits before it runs. Meanwhile N clients (1, 11, 64) follow a
// service through six sentinel endpoints, three of which accept connections and never answer, and
// discovery keeps failing and retrying for the whole run (the service is unknown to the three real
// sentinels). Each client also sends a command every 500 ms and awaits it on the pool.
//
//   mono ProbeBench.exe sr    URL_OF_REAL_SENTINELS CLIENTS SECONDS
//   mono ProbeBench.exe naive URL_OF_REAL_SENTINELS CLIENTS SECONDS
//
// `sr` uses SentinelRecovery. `naive` reproduces the incident's pattern for comparison: per client
// a reconnect timer (every 1 s, on the pool) that asks every endpoint with a synchronous socket
// call (one pool thread per endpoint, 1 s receive timeout), as the incident's client did.
using System;
using System.Collections.Concurrent;
using System.Collections.Generic;
using System.Diagnostics;
using System.Linq;
using System.Net;
using System.Net.Sockets;
using System.Text;
using System.Threading;
using System.Threading.Tasks;
using SentinelRecovery;

public static class ProbeBench
{
    private static readonly List<Socket> Held = new List<Socket>();

    /// <summary>A TCP server that accepts and never answers (on its own thread, not the pool).</summary>
    private static int StartHangingServer()
    {
        var l = new TcpListener(IPAddress.Loopback, 0);
        l.Start(1024);
        var t = new Thread(() =>
        {
            while (true)
            {
                var s = l.AcceptSocket();
                lock (Held) Held.Add(s);
            }
        }) { IsBackground = true, Name = "hanging-server" };
        t.Start();
        return ((IPEndPoint)l.LocalEndpoint).Port;
    }

    public static int Main(string[] args)
    {
        string mode = args[0], realUrl = args[1];
        int clients = int.Parse(args[2]), seconds = int.Parse(args[3]);
        // real sentinels from the topology URL: redis+sentinel://h:p,h:p,h:p/service
        var hostPart = realUrl.Substring(realUrl.IndexOf("://") + 3);
        hostPart = hostPart.Substring(0, hostPart.IndexOf('/'));
        var endpoints = hostPart.Split(',').ToList();
        for (int i = 0; i < 3; i++) endpoints.Insert(0, "127.0.0.1:" + StartHangingServer());
        var url = "redis+sentinel://" + string.Join(",", endpoints) + "/bench-unknown-service";

        int minW, minIo, maxW, maxIo;
        ThreadPool.GetMinThreads(out minW, out minIo);
        ThreadPool.GetMaxThreads(out maxW, out maxIo);

        var stop = new CancellationTokenSource();
        long commands = 0, commandErrors = 0, events = 0;
        var disposables = new List<IDisposable>();

        if (mode == "sr")
        {
            var opts = new Dictionary<string, string> { { "command_timeout_ms", "1000" }, { "retry_max_ms", "1000" } };
            for (int i = 0; i < clients; i++)
            {
                var c = SentinelClient.Open(url, opts);
                c.TopologyEvent += (s, e) => Interlocked.Increment(ref events);
                disposables.Add(c);
                Task.Run(async () =>
                {
                    while (!stop.IsCancellationRequested)
                    {
                        try { await c.ExecuteAsync("GET", "k"); }
                        catch (SentinelRecoveryException) { Interlocked.Increment(ref commandErrors); }
                        Interlocked.Increment(ref commands);
                        await Task.Delay(500);
                    }
                });
            }
        }
        else
        {
            var eps = endpoints.Select(e => new IPEndPoint(IPAddress.Parse(e.Split(':')[0]), int.Parse(e.Split(':')[1]))).ToArray();
            var cmd = Encoding.ASCII.GetBytes("*3\r\n$8\r\nSENTINEL\r\n$23\r\nget-master-addr-by-name\r\n$21\r\nbench-unknown-service\r\n");
            for (int i = 0; i < clients; i++)
            {
                // The incident: a timer tick blocks one pool thread per endpoint on a synchronous call.
                var timer = new Timer(_ =>
                {
                    var pending = new CountdownEvent(eps.Length);
                    foreach (var ep in eps)
                    {
                        ThreadPool.QueueUserWorkItem(__ =>
                        {
                            try
                            {
                                using (var s = new Socket(AddressFamily.InterNetwork, SocketType.Stream, ProtocolType.Tcp))
                                {
                                    s.ReceiveTimeout = 1000;
                                    s.Connect(ep);
                                    s.Send(cmd);
                                    var buf = new byte[512];
                                    s.Receive(buf);
                                }
                            }
                            catch (SocketException) { Interlocked.Increment(ref commandErrors); }
                            Interlocked.Increment(ref commands);
                            pending.Signal();
                        });
                    }
                    pending.Wait(); // the tick waits for its calls, holding its own pool thread
                }, null, 0, 1000);
                disposables.Add(timer);
            }
        }

        // The probe, from a dedicated thread so that the probe itself never waits for the pool.
        // A probe still not run at the end counts with the time it has waited so far (a lower bound).
        int n = seconds * 20;
        var queuedAt = new long[n];
        var ranAt = new long[n];
        Thread.Sleep(1000); // warm-up: clients open, first discovery rounds start
        var probe = new Thread(() =>
        {
            var start = Stopwatch.StartNew();
            for (int i = 0; i < n; i++)
            {
                int k = i;
                queuedAt[k] = Stopwatch.GetTimestamp();
                ThreadPool.QueueUserWorkItem(_ => Volatile.Write(ref ranAt[k], Stopwatch.GetTimestamp()));
                var sleep = (i + 1) * 50 - start.ElapsedMilliseconds;
                if (sleep > 0) Thread.Sleep((int)sleep);
            }
        }) { Name = "probe" };
        probe.Start();
        probe.Join();
        stop.Cancel();
        Thread.Sleep(1000); // let the last probes run (a starved pool still owes some)
        long end = Stopwatch.GetTimestamp();
        int unfinished = 0;
        var delays = new double[n];
        for (int i = 0; i < n; i++)
        {
            long r = Volatile.Read(ref ranAt[i]);
            if (r == 0) { unfinished++; r = end; }
            delays[i] = (r - queuedAt[i]) * 1000.0 / Stopwatch.Frequency;
        }
        int osThreads = Process.GetCurrentProcess().Threads.Count;
        foreach (var d in disposables) d.Dispose();

        var sorted = delays.OrderBy(d => d).ToArray();
        Func<double, double> pct = p => sorted[Math.Min(sorted.Length - 1, (int)Math.Ceiling(p * sorted.Length) - 1)];
        Console.WriteLine(
            "{{\"mode\":\"{0}\",\"clients\":{1},\"seconds\":{2},\"probes\":{3},\"unfinished\":{4},\"p50_ms\":{5:F2},\"p99_ms\":{6:F2},\"max_ms\":{7:F2},\"commands\":{8},\"command_errors\":{9},\"events\":{10},\"pool_min_workers\":{11},\"os_threads\":{12}}}",
            mode, clients, seconds, n, unfinished, pct(0.5), pct(0.99), sorted[sorted.Length - 1],
            Interlocked.Read(ref commands), Interlocked.Read(ref commandErrors), Interlocked.Read(ref events), minW, osThreads);
        return 0;
    }
}
