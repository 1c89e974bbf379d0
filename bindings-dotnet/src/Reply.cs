using System;
using System.Collections.Generic;
using System.Globalization;
using System.Text;

namespace SentinelRecovery
{
    /// <summary>The type of a <see cref="RedisReply"/> (RESP2/RESP3 value types).</summary>
    public enum ReplyType
    {
        /// <summary>Null (RESP3 null, RESP2 null bulk or null array).</summary>
        Nil = 0,
        /// <summary>An integer (<see cref="RedisReply.AsInt64"/>).</summary>
        Integer = 1,
        /// <summary>A RESP3 double (<see cref="RedisReply.AsDouble"/>).</summary>
        Double = 2,
        /// <summary>A RESP3 boolean (<see cref="RedisReply.AsBoolean"/>).</summary>
        Boolean = 3,
        /// <summary>A RESP3 big number, as decimal text (<see cref="RedisReply.AsString"/>).</summary>
        BigNumber = 4,
        /// <summary>A bulk string, binary safe (<see cref="RedisReply.AsBytes"/>).</summary>
        Bulk = 5,
        /// <summary>A simple status string such as <c>OK</c>.</summary>
        Simple = 6,
        /// <summary>A RESP3 verbatim string (<see cref="RedisReply.VerbatimFormat"/> tells its format).</summary>
        Verbatim = 7,
        /// <summary>An array (<see cref="RedisReply.Elements"/>).</summary>
        Array = 8,
        /// <summary>A RESP3 map (<see cref="RedisReply.Entries"/>).</summary>
        Map = 9,
        /// <summary>A RESP3 set (<see cref="RedisReply.Elements"/>).</summary>
        Set = 10,
        /// <summary>A RESP3 push message (<see cref="RedisReply.Elements"/>).</summary>
        Push = 11,
        /// <summary>An error nested inside an aggregate (a top-level error is a <see cref="ServerException"/>).</summary>
        Error = 12,
    }

    /// <summary>An immutable server reply, fully copied out of the native library. Strings are kept
    /// as bytes (binary safe); <see cref="AsString"/> decodes UTF-8.</summary>
    public sealed class RedisReply
    {
        private static readonly RedisReply[] NoElements = new RedisReply[0];
        private static readonly KeyValuePair<RedisReply, RedisReply>[] NoEntries = new KeyValuePair<RedisReply, RedisReply>[0];

        /// <summary>The shared null reply.</summary>
        public static readonly RedisReply Nil = new RedisReply(ReplyType.Nil);

        private long _integer;
        private double _double;
        private byte[] _bytes;
        private string _format;
        private RedisReply[] _elements = NoElements;
        private KeyValuePair<RedisReply, RedisReply>[] _entries = NoEntries;

        private RedisReply(ReplyType type) { Type = type; }

        /// <summary>The reply's type.</summary>
        public ReplyType Type { get; private set; }

        /// <summary>True for <see cref="ReplyType.Nil"/>.</summary>
        public bool IsNull { get { return Type == ReplyType.Nil; } }

        /// <summary>The value of an integer reply (or the parse of a bulk/simple/big-number text that is an integer).</summary>
        public long AsInt64()
        {
            if (Type == ReplyType.Integer) return _integer;
            if (_bytes != null) return long.Parse(AsString(), NumberStyles.Integer, CultureInfo.InvariantCulture);
            throw new InvalidCastException("reply of type " + Type + " is not an integer");
        }

        /// <summary>The value of a double reply (or of an integer, or the parse of a textual reply).</summary>
        public double AsDouble()
        {
            if (Type == ReplyType.Double) return _double;
            if (Type == ReplyType.Integer) return _integer;
            if (_bytes != null) return double.Parse(AsString(), NumberStyles.Float, CultureInfo.InvariantCulture);
            throw new InvalidCastException("reply of type " + Type + " is not a number");
        }

        /// <summary>The value of a boolean reply (an integer reply is true when not 0).</summary>
        public bool AsBoolean()
        {
            if (Type == ReplyType.Boolean) return _integer != 0;
            if (Type == ReplyType.Integer) return _integer != 0;
            throw new InvalidCastException("reply of type " + Type + " is not a boolean");
        }

        /// <summary>The bytes of a bulk, simple, verbatim (its text), big-number or nested error
        /// reply; null for <see cref="ReplyType.Nil"/>.</summary>
        public byte[] AsBytes()
        {
            if (Type == ReplyType.Nil) return null;
            if (_bytes == null) throw new InvalidCastException("reply of type " + Type + " has no bytes");
            return _bytes;
        }

        /// <summary>The text of a textual reply decoded as UTF-8, the decimal form of a number,
        /// or null for <see cref="ReplyType.Nil"/>.</summary>
        public string AsString()
        {
            switch (Type)
            {
                case ReplyType.Nil: return null;
                case ReplyType.Integer: return _integer.ToString(CultureInfo.InvariantCulture);
                case ReplyType.Double: return _double.ToString("R", CultureInfo.InvariantCulture);
                case ReplyType.Boolean: return _integer != 0 ? "true" : "false";
            }
            if (_bytes == null) throw new InvalidCastException("reply of type " + Type + " is not text");
            return Encoding.UTF8.GetString(_bytes);
        }

        /// <summary>The format tag of a verbatim reply (<c>txt</c>, <c>mkd</c>), otherwise null.</summary>
        public string VerbatimFormat { get { return _format; } }

        /// <summary>The elements of an array, set or push reply (empty for other types).</summary>
        public IReadOnlyList<RedisReply> Elements { get { return _elements; } }

        /// <summary>The entries of a map reply in the server's order (empty for other types).</summary>
        public IReadOnlyList<KeyValuePair<RedisReply, RedisReply>> Entries { get { return _entries; } }

        /// <summary>The reply as plain .NET values: null, <see cref="long"/>, <see cref="double"/>,
        /// <see cref="bool"/>, <see cref="string"/> (simple, verbatim, big number, nested error),
        /// <c>byte[]</c> (bulk), <c>object[]</c> (array, set, push) or a
        /// <c>List&lt;KeyValuePair&lt;object, object&gt;&gt;</c> (map).</summary>
        public object ToObject()
        {
            switch (Type)
            {
                case ReplyType.Nil: return null;
                case ReplyType.Integer: return _integer;
                case ReplyType.Double: return _double;
                case ReplyType.Boolean: return _integer != 0;
                case ReplyType.Bulk: return _bytes;
                case ReplyType.Array:
                case ReplyType.Set:
                case ReplyType.Push:
                    var a = new object[_elements.Length];
                    for (int i = 0; i < a.Length; i++) a[i] = _elements[i].ToObject();
                    return a;
                case ReplyType.Map:
                    var m = new List<KeyValuePair<object, object>>(_entries.Length);
                    foreach (var e in _entries) m.Add(new KeyValuePair<object, object>(e.Key.ToObject(), e.Value.ToObject()));
                    return m;
                default: return AsString();
            }
        }

        /// <summary>A short readable form for logs and debugging.</summary>
        public override string ToString()
        {
            switch (Type)
            {
                case ReplyType.Nil: return "(nil)";
                case ReplyType.Array:
                case ReplyType.Set:
                case ReplyType.Push: return Type + "[" + _elements.Length + "]";
                case ReplyType.Map: return "Map[" + _entries.Length + "]";
                default: return AsString();
            }
        }

        /// <summary>Deep-copies a borrowed native reply (valid only during the call).</summary>
        internal static unsafe RedisReply Copy(IntPtr r)
        {
            int t = Native.sr_reply_type(r);
            var rep = t == Native.SR_REPLY_NIL ? null : new RedisReply((ReplyType)t);
            switch (t)
            {
                case Native.SR_REPLY_NIL:
                    return Nil;
                case Native.SR_REPLY_INTEGER:
                    Check(Native.sr_reply_integer(r, out rep._integer));
                    return rep;
                case Native.SR_REPLY_DOUBLE:
                    Check(Native.sr_reply_double(r, out rep._double));
                    return rep;
                case Native.SR_REPLY_BOOLEAN:
                    byte b;
                    Check(Native.sr_reply_boolean(r, out b));
                    rep._integer = b != 0 ? 1 : 0;
                    return rep;
                case Native.SR_REPLY_BIG_NUMBER:
                case Native.SR_REPLY_BULK:
                case Native.SR_REPLY_SIMPLE:
                case Native.SR_REPLY_ERROR:
                case Native.SR_REPLY_VERBATIM:
                    {
                        byte* data;
                        UIntPtr len;
                        Check(Native.sr_reply_bytes(r, out data, out len));
                        rep._bytes = CopyBytes(data, len);
                        if (t == Native.SR_REPLY_VERBATIM && Native.sr_reply_verbatim_format(r, out data, out len) == Native.SR_OK)
                            rep._format = Encoding.UTF8.GetString(CopyBytes(data, len));
                        return rep;
                    }
                case Native.SR_REPLY_ARRAY:
                case Native.SR_REPLY_SET:
                case Native.SR_REPLY_PUSH:
                    {
                        UIntPtr len;
                        Check(Native.sr_reply_len(r, out len));
                        int n = checked((int)len.ToUInt64());
                        rep._elements = n == 0 ? NoElements : new RedisReply[n];
                        for (int i = 0; i < n; i++)
                        {
                            IntPtr e;
                            Check(Native.sr_reply_element(r, (UIntPtr)i, out e));
                            rep._elements[i] = Copy(e);
                        }
                        return rep;
                    }
                case Native.SR_REPLY_MAP:
                    {
                        UIntPtr len;
                        Check(Native.sr_reply_len(r, out len));
                        int n = checked((int)len.ToUInt64());
                        rep._entries = n == 0 ? NoEntries : new KeyValuePair<RedisReply, RedisReply>[n];
                        for (int i = 0; i < n; i++)
                        {
                            IntPtr k, v;
                            Check(Native.sr_reply_map_entry(r, (UIntPtr)i, out k, out v));
                            rep._entries[i] = new KeyValuePair<RedisReply, RedisReply>(Copy(k), Copy(v));
                        }
                        return rep;
                    }
                default:
                    throw new ProtocolException("reply of unknown type " + t);
            }
        }

        private static unsafe byte[] CopyBytes(byte* data, UIntPtr len)
        {
            int n = checked((int)len.ToUInt64());
            var a = new byte[n];
            if (n > 0) System.Runtime.InteropServices.Marshal.Copy((IntPtr)data, a, 0, n);
            return a;
        }

        private static void Check(int rc)
        {
            if (rc != Native.SR_OK)
                throw SentinelRecoveryException.Create((ErrorCode)rc, Native.Utf8(Native.sr_error_message(rc)));
        }
    }
}
