// The sr-dotnet-host thread: where what the library hands over through host mailboxes
// (sr_mailbox_t) reaches managed code: events, log records, pub/sub messages, and the completions
// of calls that hand something over or wait long (docs/architecture.md, .NET). Order, coalesced
// wake-ups, the overflow rule and the close barrier are the core's; this file only says how the
// thread is woken and what a delivery becomes.
using System;
using System.Collections.Concurrent;
using System.Diagnostics;
using System.Runtime.InteropServices;
using System.Threading;

namespace SentinelRecovery
{
    /// <summary>Drains ready mailboxes on one dedicated background thread (<c>sr-dotnet-host</c>),
    /// never on a pool or core thread: a slow handler delays later deliveries but never takes a
    /// pool thread (the starvation this library exists to avoid) or a core thread. One thread
    /// serves every client of the process.</summary>
    internal static class Host
    {
        /// <summary>The thread's name, as handlers see it.</summary>
        internal const string ThreadName = "sr-dotnet-host";

        private static readonly Native.WakeCallback WakeCallback = OnWake;
        private static readonly Native.DeliveryCallback DeliveryCallback = OnDelivery;
        internal static readonly IntPtr WakePtr = Marshal.GetFunctionPointerForDelegate(WakeCallback);
        internal static readonly IntPtr DeliveryPtr = Marshal.GetFunctionPointerForDelegate(DeliveryCallback);

        private static readonly ConcurrentQueue<HostMailbox> Ready = new ConcurrentQueue<HostMailbox>();
        private static readonly SemaphoreSlim Signal = new SemaphoreSlim(0);
        private static int _started;

        /// <summary>Starts the thread on first use.</summary>
        internal static void EnsureStarted()
        {
            if (Interlocked.CompareExchange(ref _started, 1, 0) != 0) return;
            var t = new Thread(Run) { IsBackground = true, Name = ThreadName };
            t.Start();
        }

        /// <summary>On the thread that filled the mailbox (a core thread, after the mailbox's lock
        /// was released; <c>sr_mailbox_close</c> waits for it): marks it ready and wakes the host
        /// thread; never blocks, never throws.</summary>
        private static void OnWake(IntPtr userData)
        {
            try
            {
                var mailbox = GCHandle.FromIntPtr(userData).Target as HostMailbox;
                if (mailbox == null) return;
                Ready.Enqueue(mailbox);
                Signal.Release();
            }
            catch
            {
                // Nothing may unwind into native code.
            }
        }

        private static void Run()
        {
            for (;;)
            {
                Signal.Wait();
                HostMailbox mailbox;
                while (Ready.TryDequeue(out mailbox)) mailbox.Drain();
            }
        }

        /// <summary>On this thread, inside a drain: hands one delivery to its client.</summary>
        private static unsafe void OnDelivery(IntPtr userData, IntPtr delivery)
        {
            try
            {
                var mailbox = GCHandle.FromIntPtr(userData).Target as HostMailbox;
                var d = (Native.sr_delivery_t*)delivery;
                if (mailbox == null) return;
                if (d->kind == Native.SR_DELIVERY_COMPLETION)
                {
                    var op = mailbox.Take(d->op_id);
                    // What the delivery hands over and nobody took is freed here, never leaked.
                    if (op == null || !op.Complete(delivery)) Native.ReleaseHandedOver(delivery);
                }
                else if (d->kind == Native.SR_DELIVERY_EVENT)
                {
                    var client = mailbox.Client;
                    if (client != null) client.Deliver(d->evt);
                }
                else if (d->kind == Native.SR_DELIVERY_LOG)
                {
                    SentinelClient.DeliverLog(d->level, d->target, d->message);
                }
                else if (d->kind == Native.SR_DELIVERY_DROPPED)
                {
                    SentinelClient.Report(TraceLevel.Warning, "SentinelRecovery: " + d->dropped +
                        (mailbox.Client == null ? " log records" : " events") + " were dropped: handlers did not keep up");
                }
            }
            catch (Exception e)
            {
                // Handler exceptions are reported by the client; this is a conversion failure.
                SentinelClient.Report(TraceLevel.Error, "SentinelRecovery: dropping a delivery that could not be read: " + e.GetType().Name);
            }
        }
    }
}
