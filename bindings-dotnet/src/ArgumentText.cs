using System;
using System.Globalization;
using System.Numerics;
using System.Text;

namespace SentinelRecovery
{
    /// <summary>
    /// Command arguments as bytes, with the policy every binding shares: strings as UTF-8, and one
    /// holding a lone surrogate refused with a <see cref="ConfigException"/> (never sent with U+FFFD
    /// in its place); integers in decimal; NaN refused with a <see cref="ConfigException"/>;
    /// +/-Infinity as <c>inf</c> / <c>-inf</c> (as Redis writes them); other floating-point values as
    /// the shortest text that reads back as the same value, laid out like JavaScript's
    /// <c>Number.prototype.toString</c> (<c>2</c>, <c>0.1</c>, <c>1e+21</c>, <c>1e-7</c>, <c>-0</c>).
    /// Argument 0 is the command's name.
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
            if (double.IsNaN(d)) throw new ConfigException("argument " + index + " is NaN");
            if (double.IsPositiveInfinity(d)) return "inf";
            if (double.IsNegativeInfinity(d)) return "-inf";
            long bits = BitConverter.DoubleToInt64Bits(d);
            bool negative = bits < 0;
            if (d == 0) return negative ? "-0" : "0";
            // Integral values below 2^53 are exact as a long: the common case, without big numbers.
            if (Math.Abs(d) < 9007199254740992.0 && Math.Floor(d) == d)
                return ((long)d).ToString(CultureInfo.InvariantCulture);
            int biased = (int)((bits >> 52) & 0x7FF);
            long fraction = bits & 0xFFFFFFFFFFFFFL;
            // d = m * 2^e exactly.
            long m = biased == 0 ? fraction : fraction | (1L << 52);
            int e = (biased == 0 ? 1 : biased) - 1075;
            bool lowerGapIsHalf = biased > 1 && fraction == 0; // a power of two: the next value down is closer
            return Shortest(negative, m, e, lowerGapIsHalf, 17);
        }

        /// <summary>A float's text: the shortest that reads back as the same float.</summary>
        internal static string Single(float f, int index)
        {
            if (float.IsNaN(f)) throw new ConfigException("argument " + index + " is NaN");
            if (float.IsPositiveInfinity(f)) return "inf";
            if (float.IsNegativeInfinity(f)) return "-inf";
            int bits = BitConverter.ToInt32(BitConverter.GetBytes(f), 0);
            bool negative = bits < 0;
            if (f == 0) return negative ? "-0" : "0";
            int biased = (bits >> 23) & 0xFF;
            int fraction = bits & 0x7FFFFF;
            long m = biased == 0 ? fraction : fraction | (1 << 23);
            int e = (biased == 0 ? 1 : biased) - 150;
            return Shortest(negative, m, e, biased > 1 && fraction == 0, 9);
        }

        /// <summary>
        /// The shortest decimal that reads back as the binary value <c>m * 2^e</c>, the closest of
        /// those (the even one on a tie), as ECMAScript's Number::toString picks it; exact integer
        /// arithmetic, so it does not depend on the runtime's own (on Mono, not always correctly
        /// rounded) formatting and parsing. Values that read back as <c>m * 2^e</c> are those
        /// strictly inside half a step to each neighbour, or on that bound when <c>m</c> is even
        /// (round-half-even reading).
        /// </summary>
        private static string Shortest(bool negative, long m, int e, bool lowerGapIsHalf, int maxDigits)
        {
            // In units of u = 2^(e-2): the value is 4m, the bounds 4m + 2 and 4m - 2 (4m - 1 below
            // a power of two).
            var value = new BigInteger(m) * 4;
            var high = value + 2;
            var low = value - (lowerGapIsHalf ? 1 : 2);
            bool inclusive = (m & 1) == 0;
            // The decimal exponent n of the value: 10^(n-1) <= value < 10^n.
            int n = (int)Math.Floor(Math.Log10(m) + e * Math.Log10(2)) + 1;
            while (Compare(BigInteger.One, n - 1, value, e) > 0) n--;
            while (Compare(BigInteger.One, n, value, e) <= 0) n++;
            // A form with p digits exists for every p at or above the shortest (pad with zeros):
            // binary search for the smallest p.
            int lo = 1, hi = maxDigits;
            BigInteger found = BigInteger.MinusOne;
            int foundQ = 0;
            while (lo <= hi)
            {
                int p = (lo + hi) / 2;
                BigInteger best;
                if (TryDigits(value, low, high, inclusive, e, n - p, out best))
                {
                    found = best;
                    foundQ = n - p;
                    hi = p - 1;
                }
                else
                {
                    lo = p + 1;
                }
            }
            if (found.Sign < 0) throw new InvalidOperationException("no round-trip form found"); // 17 (9) digits always suffice
            var digits = found.ToString(CultureInfo.InvariantCulture);
            return Layout(negative, digits.TrimEnd('0'), foundQ + digits.Length);
        }

        /// <summary>The closest <c>s * 10^q</c> (even <c>s</c> on a tie) that reads back as the value, if any.</summary>
        private static bool TryDigits(BigInteger value, BigInteger low, BigInteger high, bool inclusive, int e, int q, out BigInteger best)
        {
            BigInteger s = Floor(value, e, q);
            best = BigInteger.MinusOne;
            foreach (var c in new[] { s, s + 1 })
            {
                int toLow = Compare(c, q, low, e);
                int toHigh = Compare(c, q, high, e);
                bool inside = (toLow > 0 || (inclusive && toLow == 0)) && (toHigh < 0 || (inclusive && toHigh == 0));
                if (!inside) continue;
                if (best.Sign < 0)
                {
                    best = c;
                    continue;
                }
                // Both read back: the closer one, the even one on a tie.
                int d = CompareDistance(best, c, q, value, e);
                if (d > 0 || (d == 0 && c.IsEven)) best = c;
            }
            return best.Sign >= 0;
        }

        /// <summary>Sign of <c>c * 10^q - x * 2^(e-2)</c>.</summary>
        private static int Compare(BigInteger c, int q, BigInteger x, int e)
        {
            BigInteger left = c, right = x;
            Scale(ref left, ref right, q, e);
            return left.CompareTo(right);
        }

        /// <summary>Sign of <c>|a*10^q - v| - |b*10^q - v|</c>, v = x * 2^(e-2).</summary>
        private static int CompareDistance(BigInteger a, BigInteger b, int q, BigInteger x, int e)
        {
            BigInteger la = a, lb = b, r = x, r2 = x;
            Scale(ref la, ref r, q, e);
            Scale(ref lb, ref r2, q, e);
            return BigInteger.Abs(la - r).CompareTo(BigInteger.Abs(lb - r2));
        }

        /// <summary>Multiplies both sides of <c>c * 10^q ? x * 2^(e-2)</c> into integers.</summary>
        private static void Scale(ref BigInteger c, ref BigInteger x, int q, int e)
        {
            if (q >= 0) c *= BigInteger.Pow(10, q);
            else x *= BigInteger.Pow(10, -q);
            if (e - 2 >= 0) x <<= e - 2;
            else c <<= 2 - e;
        }

        /// <summary><c>floor(x * 2^(e-2) / 10^q)</c>.</summary>
        private static BigInteger Floor(BigInteger x, int e, int q)
        {
            BigInteger num = x, den = BigInteger.One;
            if (e - 2 >= 0) num <<= e - 2;
            else den <<= 2 - e;
            if (q >= 0) den *= BigInteger.Pow(10, q);
            else num *= BigInteger.Pow(10, -q);
            return BigInteger.Divide(num, den);
        }

        /// <summary><c>0.DIGITS x 10^n</c> in JavaScript's layout: plain for decimal exponents from
        /// -7 to 20, exponent form (<c>e+21</c>, <c>e-7</c>) outside.</summary>
        private static string Layout(bool negative, string digits, int n)
        {
            int k = digits.Length;
            var b = new StringBuilder(32);
            if (negative) b.Append('-');
            if (k <= n && n <= 21)
            {
                b.Append(digits).Append('0', n - k);
            }
            else if (0 < n && n <= 21)
            {
                b.Append(digits, 0, n).Append('.').Append(digits, n, k - n);
            }
            else if (-6 < n && n <= 0)
            {
                b.Append("0.").Append('0', -n).Append(digits);
            }
            else
            {
                int e = n - 1;
                b.Append(digits[0]);
                if (k > 1) b.Append('.').Append(digits, 1, k - 1);
                b.Append('e').Append(e < 0 ? '-' : '+').Append(Math.Abs(e).ToString(CultureInfo.InvariantCulture));
            }
            return b.ToString();
        }
    }
}
