using System;
using System.Text;

namespace SentinelRecovery
{
    /// <summary>
    /// Command arguments as bytes, with the policy every binding shares: strings as UTF-8, and one
    /// holding a lone surrogate refused with a <see cref="ConfigException"/> (never sent with U+FFFD
    /// in its place); integers in decimal; floating-point values as the core gives them (its
    /// <c>arguments</c> module, through sr_argument_float_text: the shortest text that reads back,
    /// laid out like JavaScript's <c>Number.prototype.toString</c>, <c>inf</c> / <c>-inf</c>, NaN
    /// refused with a <see cref="ConfigException"/>). Argument 0 is the command's name.
    /// </summary>
    internal static class ArgumentText
    {
        private static readonly UTF8Encoding StrictUtf8 = new UTF8Encoding(false, true);

        /// <summary><paramref name="s"/> as UTF-8, or a <see cref="ConfigException"/> for a lone surrogate.</summary>
        internal static byte[] Utf8(string s, int index)
        {
            try
            {
                return StrictUtf8.GetBytes(s);
            }
            catch (EncoderFallbackException)
            {
                throw new ConfigException("argument " + index + " is not valid Unicode: lone surrogate");
            }
        }

        /// <summary>A double's text (see the class summary).</summary>
        internal static string Double(double d, int index)
        {
            return FloatText(d, false, index);
        }

        /// <summary>A float's text: the shortest that reads back as the same float.</summary>
        internal static string Single(float f, int index)
        {
            return FloatText(f, true, index);
        }

        /// <summary>The core's text for a floating-point argument (sr_argument_float_text), or its
        /// <see cref="ConfigException"/> for NaN.</summary>
        private static unsafe string FloatText(double value, bool single, int index)
        {
            byte* buf = stackalloc byte[32];
            UIntPtr len;
            IntPtr error;
            int rc = Native.sr_argument_float_text(value, single, (UIntPtr)index, buf, (UIntPtr)32, out len, out error);
            if (rc != Native.SR_OK) throw SentinelRecoveryException.TakeNative(rc, error);
            return Encoding.ASCII.GetString(buf, (int)len.ToUInt32());
        }
    }
}
