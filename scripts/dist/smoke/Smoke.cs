// make test-dist: the SentinelRecovery package, installed by nuget from a local feed into a fresh
// consumer folder, through a kill -9 failover (Mono, no Rust toolchain).
//   mono smoke.exe URL EXPECTED_VERSION
using System;
using System.Threading.Tasks;
using SentinelRecovery;

public static class Smoke
{
    public static int Main(string[] args)
    {
        try
        {
            return Run(args[0], args[1]).GetAwaiter().GetResult();
        }
        catch (Exception e)
        {
            Console.Error.WriteLine("smoke: FAILED: " + e);
            return 1;
        }
    }

    private static async Task<int> Run(string url, string version)
    {
        if (SentinelClient.NativeVersion != version)
            throw new Exception("native version " + SentinelClient.NativeVersion + " != " + version);
        Console.WriteLine("assembly: " + typeof(SentinelClient).Assembly.Location);
        const string key = "dist:dotnet", value = "from the nupkg";
        using (var client = await SentinelClient.ConnectAsync(url))
        {
            var switched = new TaskCompletionSource<PrimaryChangedEventArgs>(TaskCreationOptions.RunContinuationsAsynchronously);
            client.PrimaryChanged += (sender, e) => { if (e.OldPrimary != null) switched.TrySetResult(e); };
            await client.ExecuteAsync("SET", key, value);
            var got = (await client.ExecuteAsync("GET", key)).AsString();
            if (got != value) throw new Exception("GET gave " + got);
            Console.WriteLine("READY dotnet " + SentinelClient.NativeVersion);
            var first = await Task.WhenAny(switched.Task, Task.Delay(TimeSpan.FromSeconds(90)));
            if (first != switched.Task) throw new Exception("no primary_changed within 90 s");
            var ev = switched.Task.Result;
            Console.WriteLine("SWITCH " + ev.OldPrimary + " -> " + ev.NewPrimary);
            var again = (await client.ExecuteAsync("GET", key)).AsString();
            if (again != value) throw new Exception("GET after the failover gave " + again);
        }
        Console.WriteLine("OK dotnet");
        return 0;
    }
}
