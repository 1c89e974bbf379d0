using System;
using System.Collections.Concurrent;
using System.Collections.Generic;
using System.Diagnostics;
using System.Threading;

namespace SentinelRecovery
{
    // EventKind is generated from the core's table: Tables.g.cs.

    /// <summary>A topology event. Every event carries <see cref="Kind"/>, <see cref="Service"/> and
    /// <see cref="At"/>; the subclass of each kind adds its own fields.</summary>
    public class TopologyEventArgs : EventArgs
    {
        /// <summary>The kind.</summary>
        public EventKind Kind { get; internal set; }

        /// <summary>The kind's snake_case name shared by all bindings (<c>"primary_changed"</c>, ...).</summary>
        public string KindName { get; internal set; }

        /// <summary>The service.</summary>
        public string Service { get; internal set; }

        /// <summary>Unix time in milliseconds when the client observed the event.</summary>
        public long AtUnixMs { get; internal set; }

        /// <summary><see cref="AtUnixMs"/> as a UTC time.</summary>
        public DateTimeOffset At { get { return DateTimeOffset.FromUnixTimeMilliseconds(AtUnixMs); } }

        /// <summary>The whole event as one JSON object, the form the CLI prints.</summary>
        public string Json { get; internal set; }

        /// <summary>The JSON form.</summary>
        public override string ToString() { return Json ?? KindName; }
    }

    /// <summary><c>primary_changed</c>: the client now follows <see cref="NewPrimary"/>.</summary>
    public sealed class PrimaryChangedEventArgs : TopologyEventArgs
    {
        /// <summary>The previous primary (null at the first discovery).</summary>
        public NodeAddress OldPrimary { get; internal set; }
        /// <summary>The new primary.</summary>
        public NodeAddress NewPrimary { get; internal set; }
    }

    /// <summary><c>replicas_changed</c>: the set of healthy replicas changed.</summary>
    public sealed class ReplicasChangedEventArgs : TopologyEventArgs
    {
        /// <summary>The replicas now.</summary>
        public IReadOnlyList<NodeAddress> Replicas { get; internal set; }
    }

    /// <summary><c>sentinels_changed</c>: a sentinel was learned.</summary>
    public sealed class SentinelsChangedEventArgs : TopologyEventArgs
    {
        /// <summary>All known sentinels now.</summary>
        public IReadOnlyList<SentinelInfo> Sentinels { get; internal set; }
    }

    /// <summary><c>sentinel_down</c> / <c>sentinel_up</c>: a sentinel stopped or resumed answering.</summary>
    public sealed class SentinelStateEventArgs : TopologyEventArgs
    {
        /// <summary>The sentinel.</summary>
        public NodeAddress Sentinel { get; internal set; }
    }

    /// <summary><c>connection_lost</c> / <c>connection_restored</c>: the connection to the primary.</summary>
    public sealed class ConnectionEventArgs : TopologyEventArgs
    {
        /// <summary>The primary.</summary>
        public NodeAddress Primary { get; internal set; }
    }

    /// <summary><c>discovery_failed</c>: a discovery round found no usable primary; the last
    /// primary is kept and discovery keeps retrying.</summary>
    public sealed class DiscoveryFailedEventArgs : TopologyEventArgs
    {
        /// <summary>Why (its <see cref="SentinelRecoveryException.Code"/> tells which case).</summary>
        public SentinelRecoveryException Error { get; internal set; }
    }

    /// <summary><c>failover_started</c>: the failover leader started promoting a replica; writes
    /// wait until <c>primary_changed</c>, or resume on the old primary if the failover aborts.</summary>
    public sealed class FailoverStartedEventArgs : TopologyEventArgs
    {
        /// <summary>The primary being demoted.</summary>
        public NodeAddress Primary { get; internal set; }
        /// <summary>The replica being promoted.</summary>
        public NodeAddress Promoting { get; internal set; }
    }

    /// <summary><c>sentinel_tilt</c>: a sentinel entered or left TILT.</summary>
    public sealed class SentinelTiltEventArgs : TopologyEventArgs
    {
        /// <summary>The sentinel.</summary>
        public NodeAddress Sentinel { get; internal set; }
        /// <summary>True when it entered TILT, false when it left.</summary>
        public bool On { get; internal set; }
    }

    /// <summary><c>sentinel_service_unknown</c>: a reachable sentinel does not monitor the service.</summary>
    public sealed class SentinelServiceUnknownEventArgs : TopologyEventArgs
    {
        /// <summary>The sentinel.</summary>
        public NodeAddress Sentinel { get; internal set; }
    }

    /// <summary><c>subscription_lost</c> / <c>subscription_restored</c>: a pub/sub
    /// <see cref="Subscription"/> of the client lost its node, or is back (every channel and pattern
    /// subscribed again). Messages published in between are missed: Redis pub/sub is at-most-once.</summary>
    public sealed class SubscriptionEventArgs : TopologyEventArgs
    {
        /// <summary>The node the subscription was on (lost) or is on now (restored).</summary>
        public NodeAddress Address { get; internal set; }
        /// <summary>For <c>subscription_restored</c>: milliseconds since <c>subscription_lost</c>; 0 otherwise.</summary>
        public long GapMs { get; internal set; }
    }

    /// <summary><c>sentinel_majority_lost</c> / <c>sentinel_majority_regained</c> (option
    /// <c>sentinel_majority_ms</c>): fewer than a majority of the known sentinels answered in time,
    /// so writes wait; or a majority names the primary again, so they resume. The counts
    /// (<c>heard</c>, <c>confirmed</c>, <c>known</c>) are in <see cref="TopologyEventArgs.Json"/>.</summary>
    public sealed class SentinelMajorityEventArgs : TopologyEventArgs
    {
        /// <summary>For <c>sentinel_majority_regained</c>: the primary the majority names; null for
        /// <c>sentinel_majority_lost</c>.</summary>
        public NodeAddress Primary { get; internal set; }
    }

    /// <summary>An event handler threw (<see cref="SentinelClient.EventHandlerError"/>).</summary>
    public sealed class EventHandlerErrorEventArgs : EventArgs
    {
        /// <summary>Creates the arguments.</summary>
        public EventHandlerErrorEventArgs(Exception exception, TopologyEventArgs evt)
        {
            Exception = exception;
            Event = evt;
        }

        /// <summary>What the handler threw.</summary>
        public Exception Exception { get; private set; }

        /// <summary>The event the handler was given.</summary>
        public TopologyEventArgs Event { get; private set; }
    }

    /// <summary>An event as the library lends it (<c>sr_event_t</c>), as .NET event arguments.</summary>
    internal static class EventConversion
    {
        internal static unsafe TopologyEventArgs Convert(IntPtr p)
        {
            var e = (Native.sr_event_t*)p;
            TopologyEventArgs a;
            switch ((EventKind)e->kind)
            {
                case EventKind.PrimaryChanged:
                    a = new PrimaryChangedEventArgs { OldPrimary = NodeAddress.From(e->old_primary), NewPrimary = NodeAddress.From(e->address) };
                    break;
                case EventKind.ReplicasChanged:
                    a = new ReplicasChangedEventArgs { Replicas = NodeAddress.List(e->replicas, e->replicas_len) };
                    break;
                case EventKind.SentinelsChanged:
                    a = new SentinelsChangedEventArgs { Sentinels = SentinelInfo.List(e->sentinels, e->sentinels_len) };
                    break;
                case EventKind.SentinelDown:
                case EventKind.SentinelUp:
                    a = new SentinelStateEventArgs { Sentinel = NodeAddress.From(e->address) };
                    break;
                case EventKind.ConnectionLost:
                case EventKind.ConnectionRestored:
                    a = new ConnectionEventArgs { Primary = NodeAddress.From(e->address) };
                    break;
                case EventKind.DiscoveryFailed:
                    a = new DiscoveryFailedEventArgs
                    {
                        Error = e->error == IntPtr.Zero ? null : SentinelRecoveryException.FromNative(e->error)
                    };
                    break;
                case EventKind.FailoverStarted:
                    a = new FailoverStartedEventArgs { Primary = NodeAddress.From(e->old_primary), Promoting = NodeAddress.From(e->address) };
                    break;
                case EventKind.SentinelTilt:
                    a = new SentinelTiltEventArgs { Sentinel = NodeAddress.From(e->address), On = e->on != 0 };
                    break;
                case EventKind.SentinelServiceUnknown:
                    a = new SentinelServiceUnknownEventArgs { Sentinel = NodeAddress.From(e->address) };
                    break;
                case EventKind.SubscriptionLost:
                case EventKind.SubscriptionRestored:
                    a = new SubscriptionEventArgs { Address = NodeAddress.From(e->address), GapMs = (long)e->gap_ms };
                    break;
                case EventKind.SentinelMajorityLost:
                case EventKind.SentinelMajorityRegained:
                    a = new SentinelMajorityEventArgs { Primary = NodeAddress.From(e->address) };
                    break;
                default:
                    a = new TopologyEventArgs();
                    break;
            }
            int k = e->kind;
            a.Kind = Enum.IsDefined(typeof(EventKind), k) ? (EventKind)k : EventKind.Other;
            a.KindName = Native.Utf8(e->kind_name);
            a.Service = Native.Utf8(e->service);
            a.AtUnixMs = (long)e->at;
            a.Json = Native.Utf8(e->json);
            return a;
        }
    }
}
