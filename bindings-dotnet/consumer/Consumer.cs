// Loads SentinelRecovery from an unpacked .nupkg (lib/netstandard2.0 + runtimes/linux-x64/native,
// found by Mono through the package's SentinelRecovery.dll.config) and talks to a real topology.
using System;
using System.Threading.Tasks;
using SentinelRecovery;

public static class Consumer
{
    public static int Main(string[] args)
    {
        try
        {
            return Run(args[0]).GetAwaiter().GetResult();
        }
        catch (Exception e)
        {
            Console.Error.WriteLine("consumer: FAILED: " + e);
            return 1;
        }
    }

    private static async Task<int> Run(string url)
    {
        Console.WriteLine("assembly: " + typeof(SentinelClient).Assembly.Location);
        Console.WriteLine("native:   " + SentinelClient.NativeVersion);
        using (var c = await SentinelClient.ConnectAsync(url))
        {
            Console.WriteLine("topology: " + c.GetTopology());
            await c.ExecuteAsync("SET", "consumer:key", "from the package");
            var v = (await c.ExecuteAsync("GET", "consumer:key")).AsString();
            Console.WriteLine("GET:      " + v);
            return v == "from the package" ? 0 : 1;
        }
    }
}
