using System;
using System.Collections.Generic;

namespace SentinelRecovery
{
    /// <summary>A node address: host (as configured or reported by a sentinel) and TCP port.</summary>
    public sealed class NodeAddress : IEquatable<NodeAddress>
    {
        /// <summary>Creates an address.</summary>
        public NodeAddress(string host, int port) { Host = host; Port = port; }

        /// <summary>Creates an address mapped by <c>address_map</c> from <paramref name="announced"/>.</summary>
        public NodeAddress(string host, int port, NodeAddress announced) : this(host, port) { Announced = announced; }

        /// <summary>The address a sentinel reported, when <c>address_map</c> mapped it to this one
        /// (where the client connects); null when used as reported or configured. Not part of
        /// equality: two addresses are equal when they connect to the same place.</summary>
        public NodeAddress Announced { get; private set; }

        /// <summary>Host name or IP address.</summary>
        public string Host { get; private set; }

        /// <summary>TCP port.</summary>
        public int Port { get; private set; }

        /// <summary>Same host and port.</summary>
        public bool Equals(NodeAddress other) { return other != null && other.Port == Port && other.Host == Host; }

        /// <summary>Same host and port.</summary>
        public override bool Equals(object obj) { return Equals(obj as NodeAddress); }

        /// <summary>Hash of host and port.</summary>
        public override int GetHashCode() { return (Host ?? "").GetHashCode() * 31 + Port; }

        /// <summary><c>host:port</c>.</summary>
        public override string ToString() { return Host + ":" + Port; }

        internal static unsafe NodeAddress From(Native.sr_address_t* a)
        {
            return a == null ? null : new NodeAddress(Native.Utf8(a->host), a->port, From(a->announced));
        }

        internal static unsafe IReadOnlyList<NodeAddress> List(Native.sr_address_t* a, UIntPtr len)
        {
            int n = (int)len.ToUInt64();
            var l = new NodeAddress[a == null ? 0 : n];
            for (int i = 0; i < l.Length; i++) l[i] = From(a + i);
            return l;
        }
    }

    /// <summary>A sentinel as the client knows it.</summary>
    public sealed class SentinelInfo
    {
        /// <summary>Creates a sentinel entry.</summary>
        public SentinelInfo(string host, int port, bool up) : this(host, port, up, false, true) { }

        /// <summary>Creates a sentinel entry with its TILT and service state.</summary>
        public SentinelInfo(string host, int port, bool up, bool tilt, bool knowsService)
        {
            Host = host; Port = port; Up = up; Tilt = tilt; KnowsService = knowsService;
        }

        /// <summary>Creates a sentinel entry that <c>address_map</c> mapped from <paramref name="announced"/>.</summary>
        public SentinelInfo(string host, int port, bool up, bool tilt, bool knowsService, NodeAddress announced)
            : this(host, port, up, tilt, knowsService)
        {
            Announced = announced;
        }

        /// <summary>The address another sentinel reported, when <c>address_map</c> mapped it to
        /// <see cref="Host"/>:<see cref="Port"/>; null otherwise.</summary>
        public NodeAddress Announced { get; private set; }

        /// <summary>Host as configured (names are kept) or as reported by another sentinel.</summary>
        public string Host { get; private set; }

        /// <summary>TCP port.</summary>
        public int Port { get; private set; }

        /// <summary>Whether the last attempt to ask it succeeded (false before it was ever reached).</summary>
        public bool Up { get; private set; }

        /// <summary>Whether it is in TILT: it answers, but takes part in no failover until TILT ends.</summary>
        public bool Tilt { get; private set; }

        /// <summary>False once it answered that it does not monitor the service.</summary>
        public bool KnowsService { get; private set; }

        /// <summary><c>host:port (up|down)</c>.</summary>
        public override string ToString() { return Host + ":" + Port + (Up ? " (up)" : " (down)"); }

        internal static unsafe IReadOnlyList<SentinelInfo> List(Native.sr_sentinel_t* s, UIntPtr len)
        {
            int n = (int)len.ToUInt64();
            var l = new SentinelInfo[s == null ? 0 : n];
            for (int i = 0; i < l.Length; i++)
                l[i] = new SentinelInfo(Native.Utf8(s[i].host), s[i].port, s[i].up != 0, s[i].tilt != 0,
                    s[i].knows_service != 0, NodeAddress.From(s[i].announced));
            return l;
        }
    }

    /// <summary>A point-in-time view of the service (<see cref="SentinelClient.GetTopology"/>).</summary>
    public sealed class Topology
    {
        /// <summary>The service (master name).</summary>
        public string Service { get; private set; }

        /// <summary>The verified primary, or null before the first successful discovery.</summary>
        public NodeAddress Primary { get; private set; }

        /// <summary>Healthy replicas.</summary>
        public IReadOnlyList<NodeAddress> Replicas { get; private set; }

        /// <summary>Every known sentinel, configured ones first.</summary>
        public IReadOnlyList<SentinelInfo> Sentinels { get; private set; }

        /// <summary>The sentinels' config epoch of the service at the last successful discovery.</summary>
        public ulong Epoch { get; private set; }

        /// <summary>True when the last discovery round found and verified the primary.</summary>
        public bool Healthy { get; private set; }

        /// <summary>A readable one-line summary.</summary>
        public override string ToString()
        {
            return Service + ": primary " + (Primary == null ? "none" : Primary.ToString()) + ", " + Replicas.Count +
                " replicas, " + Sentinels.Count + " sentinels, epoch " + Epoch + (Healthy ? ", healthy" : ", not healthy");
        }

        /// <summary>Copies and frees an owned native topology.</summary>
        internal static Topology Take(IntPtr p)
        {
            try
            {
                return Copy(p);
            }
            finally
            {
                Native.sr_topology_free(p);
            }
        }

        /// <summary>Copies a native topology (owned or lent).</summary>
        internal static unsafe Topology Copy(IntPtr p)
        {
            var t = (Native.sr_topology_t*)p;
            return new Topology
            {
                Service = Native.Utf8(t->service),
                Primary = NodeAddress.From(t->primary),
                Replicas = NodeAddress.List(t->replicas, t->replicas_len),
                Sentinels = SentinelInfo.List(t->sentinels, t->sentinels_len),
                Epoch = t->epoch,
                Healthy = t->healthy != 0,
            };
        }
    }
}
