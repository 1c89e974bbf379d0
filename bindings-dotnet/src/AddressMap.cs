// address_map's function form over sr_client_open_mapped / sr_doctor_options_t, and the packing
// of a URL and its options into NUL-terminated UTF-8 for the C ABI (shared by Open and the doctor).
using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Runtime.InteropServices;
using System.Text;

namespace SentinelRecovery
{
    internal static unsafe partial class Native
    {
        /// <summary><c>sr_address_map_cb</c>: runs on a core thread; must answer quickly, never throw.</summary>
        [UnmanagedFunctionPointer(CallingConvention.Cdecl)]
        internal delegate int AddressMapCallback(IntPtr userData, IntPtr host, ushort port, IntPtr mappedHost,
            UIntPtr mappedHostLen, IntPtr mappedPort);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int sr_client_open_mapped(byte* url, sr_option_t* options, UIntPtr optionsLen,
            IntPtr map, IntPtr mapUserData, out ClientHandle client, out IntPtr error);
    }

    /// <summary>
    /// A managed <c>address_map</c> function as the C callback. The instance owns the delegate the
    /// native side calls, so it must stay reachable as long as the client (or diagnosis) using it:
    /// <see cref="ClientHandle"/> keeps it until the client is closed.
    /// </summary>
    internal sealed class AddressMapper
    {
        private readonly Func<NodeAddress, NodeAddress> _map;
        private readonly Native.AddressMapCallback _callback;

        internal AddressMapper(Func<NodeAddress, NodeAddress> map)
        {
            _map = map;
            _callback = OnMap;
            Pointer = Marshal.GetFunctionPointerForDelegate(_callback);
        }

        /// <summary>The function pointer to hand to the library.</summary>
        internal IntPtr Pointer { get; private set; }

        internal static AddressMapper For(Func<NodeAddress, NodeAddress> map)
        {
            return map == null ? null : new AddressMapper(map);
        }

        private unsafe int OnMap(IntPtr userData, IntPtr host, ushort port, IntPtr mappedHost, UIntPtr mappedHostLen,
            IntPtr mappedPort)
        {
            string reported = null;
            try
            {
                reported = Native.Utf8(host) + ":" + port;
                var mapped = _map(new NodeAddress(Native.Utf8(host), port));
                if (mapped == null) return 0;
                byte[] b = Native.ToUtf8Z(mapped.Host ?? "");
                if (b.Length <= 1 || (ulong)b.Length > mappedHostLen.ToUInt64() || mapped.Port <= 0 || mapped.Port > 65535)
                    return -1; // the library logs it and uses the reported address
                Marshal.Copy(b, 0, mappedHost, b.Length);
                *(ushort*)mappedPort = (ushort)mapped.Port;
                return 1;
            }
            catch (Exception e)
            {
                try
                {
                    SentinelClient.Report(TraceLevel.Warning, "address_map function threw for " + reported +
                        "; using the reported address: " + e.GetType().Name + ": " + e.Message);
                }
                catch
                {
                }
                return 0;
            }
        }
    }

    /// <summary>A URL and its options as one pinned-able block of NUL-terminated UTF-8 strings.</summary>
    internal sealed class NativeOptions
    {
        internal byte[] Buffer;
        internal int[] Offsets;
        internal int Count;

        internal static NativeOptions Pack(string url, IDictionary<string, string> options)
        {
            if (url == null) throw new ArgumentNullException("url");
            var strings = new List<string> { url };
            if (options != null)
            {
                foreach (var kv in options)
                {
                    if (kv.Key == null || kv.Value == null) throw new ArgumentException("option keys and values must not be null", "options");
                    strings.Add(kv.Key);
                    strings.Add(kv.Value);
                }
            }
            var offsets = new int[strings.Count];
            int total = 0;
            foreach (var s in strings)
            {
                if (s.IndexOf('\0') >= 0) throw new ArgumentException("URL and options must not contain NUL characters");
                total += Encoding.UTF8.GetByteCount(s) + 1;
            }
            var buf = new byte[total];
            int pos = 0;
            for (int i = 0; i < strings.Count; i++)
            {
                offsets[i] = pos;
                pos += Encoding.UTF8.GetBytes(strings[i], 0, strings[i].Length, buf, pos) + 1;
            }
            return new NativeOptions { Buffer = buf, Offsets = offsets, Count = (strings.Count - 1) / 2 };
        }

        /// <summary>Fills <paramref name="o"/> (room for <see cref="Count"/> options) with pointers into
        /// <paramref name="b"/>, the pinned <see cref="Buffer"/>.</summary>
        internal unsafe void Fill(byte* b, Native.sr_option_t* o)
        {
            for (int i = 0; i < Count; i++)
            {
                o[i].key = (IntPtr)(b + Offsets[1 + 2 * i]);
                o[i].value = (IntPtr)(b + Offsets[2 + 2 * i]);
            }
        }

        /// <summary>Wipes the buffer (it may hold passwords).</summary>
        internal void Clear() { Array.Clear(Buffer, 0, Buffer.Length); }
    }
}
