// How long a completion takes to reach awaiting code, in whatever build of SentinelRecovery.dll
// sits beside this program (bench/dotnet/completions.sh builds each completion path and runs
// them interleaved). One JSON line per run:
//   seq:     sequential GET 16 B, each awaited on the pool before the next: mean / p50 / p99 µs
//   x64:     64 async loops of GET 16 B on the pool for SECONDS: ops/s
//   starved: sync-over-async on a starved pool: 64 pool work items, each blocking on
//            ExecuteAsync(...).Result 20 times; ms until all are done (a completion that needs a
//            pool thread waits for the pool to grow)
//
//   mono CompletionBench.exe URL LABEL SEQ_OPS X64_SECONDS
using System;
using System.Diagnostics;
using System.Linq;
using System.Threading;
using System.Threading.Tasks;
using SentinelRecovery;

public static class CompletionBench
{
    public static int Main(string[] args)
    {
        string url = args[0], label = args[1];
        int seqOps = int.Parse(args[2]), seconds = int.Parse(args[3]);
        using (var c = SentinelClient.ConnectAsync(url).GetAwaiter().GetResult())
        {
            c.Execute("SET", "bench:k", new string('v', 16));
            double[] lat = Task.Run(() => Sequential(c, seqOps)).GetAwaiter().GetResult();
            double ops = Task.Run(() => InFlight(c, 64, seconds)).GetAwaiter().GetResult();
            double starvedMs = Starved(c, 64, 20);
            var sorted = lat.OrderBy(x => x).ToArray();
            Console.WriteLine(
                "{{\"label\":\"{0}\",\"seq_ops\":{1},\"seq_mean_us\":{2:F1},\"seq_p50_us\":{3:F1},\"seq_p99_us\":{4:F1},\"x64_ops_per_s\":{5:F0},\"starved_ms\":{6}}}",
                label, seqOps, lat.Average(), sorted[sorted.Length / 2], sorted[(int)(sorted.Length * 0.99)], ops, Math.Round(starvedMs));
        }
        return 0;
    }

    private static async Task<double[]> Sequential(SentinelClient c, int n)
    {
        for (int i = 0; i < 2000; i++) await c.ExecuteAsync("GET", "bench:k");
        var lat = new double[n];
        for (int i = 0; i < n; i++)
        {
            long t = Stopwatch.GetTimestamp();
            await c.ExecuteAsync("GET", "bench:k");
            lat[i] = (Stopwatch.GetTimestamp() - t) * 1e6 / Stopwatch.Frequency;
        }
        return lat;
    }

    private static async Task<double> InFlight(SentinelClient c, int loops, int seconds)
    {
        long done = 0;
        bool counting = false, stop = false;
        Func<Task> loop = async () =>
        {
            while (!Volatile.Read(ref stop))
            {
                await c.ExecuteAsync("GET", "bench:k");
                if (Volatile.Read(ref counting)) Interlocked.Increment(ref done);
            }
        };
        var all = Enumerable.Range(0, loops).Select(_ => Task.Run(loop)).ToArray();
        await Task.Delay(1000); // warm-up
        var sw = Stopwatch.StartNew();
        Volatile.Write(ref counting, true);
        await Task.Delay(seconds * 1000);
        Volatile.Write(ref counting, false);
        double elapsed = sw.Elapsed.TotalSeconds;
        Volatile.Write(ref stop, true);
        await Task.WhenAll(all);
        return Interlocked.Read(ref done) / elapsed;
    }

    private static double Starved(SentinelClient c, int items, int each)
    {
        var all = new CountdownEvent(items);
        var sw = Stopwatch.StartNew();
        for (int i = 0; i < items; i++)
        {
            ThreadPool.QueueUserWorkItem(_ =>
            {
                for (int j = 0; j < each; j++) c.ExecuteAsync("GET", "bench:k").Result.ToString();
                all.Signal();
            });
        }
        all.Wait();
        return sw.Elapsed.TotalMilliseconds;
    }
}
